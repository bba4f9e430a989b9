package enforce

import (
	"reflect"
	"strings"
	"testing"

	"flextopo.dev/node/alloc"
)

func inv() *Inventory {
	return &Inventory{
		GPUMinor:  map[string]int{"GPU-0": 0, "GPU-1": 1, "GPU-2": 2, "GPU-3": 3},
		MIGParent: map[string]string{"MIG-a": "GPU-3", "MIG-b": "GPU-3"},
		CPUs:      map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true},
		NUMANodes: map[int]bool{0: true, 1: true},
	}
}

const base = `"version":1,"node":"n1","level":"numa","mode":"guaranteed","gpuIndexes":[],"numaNodes":[1],"memoryMiB":0`

func mustAlloc(t *testing.T, body string) *alloc.Allocation {
	t.Helper()
	a, err := alloc.ParseAllocation("{" + base + "," + body + "}")
	if err != nil {
		t.Fatalf("allocation %s: %v", body, err)
	}
	return a
}

func gpuReq(name string, n int64) ContainerRequest {
	return ContainerRequest{Name: name, Requests: map[string]int64{"nvidia.com/gpu": n, "cpu-like/ignored": 4}}
}

// envvar is a container as the device plugin's envvar strategy leaves it,
// with the device specs it returns.
func envvar(name string, uuids ...string) Container {
	c := Container{Name: name, Env: []string{"PATH=/bin", VisibleDevicesEnv + "=" + strings.Join(uuids, ",")}}
	for _, u := range uuids {
		m := inv().GPUMinor[u]
		c.Devices = append(c.Devices, Device{Path: "/dev/nvidia" + string(rune('0'+m)), Major: 195, Minor: int64(m)})
	}
	c.Devices = append(c.Devices, Device{Path: "/dev/nvidiactl", Major: 195, Minor: 255})
	return c
}

func TestBuild(t *testing.T) {
	cases := []struct {
		name    string
		alloc   string
		pod     []ContainerRequest
		ctr     Container
		want    Plan
		wantErr string
	}{{
		name:  "two GPUs and pinned CPUs replace the device plugin's choice",
		alloc: `"gpus":["GPU-2","GPU-3"],"mig":[],"cpuset":"4-7"`,
		pod:   []ContainerRequest{gpuReq("main", 2)},
		ctr:   envvar("main", "GPU-0", "GPU-2"),
		want: Plan{CPUs: "4-7", Mems: "1", SetEnv: map[string]string{VisibleDevicesEnv: "GPU-2,GPU-3"},
			RemoveDevices: []Device{{Path: "/dev/nvidia0", Major: 195, Minor: 0}},
			AddDevices:    []Device{{Path: "/dev/nvidia3", Major: 195, Minor: 3}},
			Holding:       alloc.Holding{GPUs: []string{"GPU-2", "GPU-3"}, CPUSet: "4-7"}, AdjustsDevices: true},
	}, {
		name:  "CPUs only: devices untouched",
		alloc: `"gpus":[],"mig":[],"cpuset":"0-1"`,
		pod:   []ContainerRequest{{Name: "main"}},
		ctr:   Container{Name: "main", Env: []string{"PATH=/bin"}},
		want:  Plan{CPUs: "0-1", Mems: "1", SetEnv: map[string]string{}, Holding: alloc.Holding{CPUSet: "0-1"}},
	}, {
		name:  "second container takes the GPUs after the first's",
		alloc: `"gpus":["GPU-0","GPU-1","GPU-2"],"mig":[],"cpuset":""`,
		pod:   []ContainerRequest{gpuReq("a", 1), {Name: "sidecar"}, gpuReq("b", 2)},
		ctr:   envvar("b", "GPU-0", "GPU-1"),
		want: Plan{SetEnv: map[string]string{VisibleDevicesEnv: "GPU-1,GPU-2"},
			RemoveDevices: []Device{{Path: "/dev/nvidia0", Major: 195, Minor: 0}}, AddDevices: []Device{{Path: "/dev/nvidia2", Major: 195, Minor: 2}},
			Holding: alloc.Holding{GPUs: []string{"GPU-1", "GPU-2"}}, AdjustsDevices: true},
	}, {
		name:  "a container without GPUs in a GPU pod is left without",
		alloc: `"gpus":["GPU-0"],"mig":[],"cpuset":""`,
		pod:   []ContainerRequest{gpuReq("a", 1), {Name: "sidecar"}},
		ctr:   Container{Name: "sidecar"},
		want:  Plan{SetEnv: map[string]string{}},
	}, {
		name:  "init container reuses the first GPUs",
		alloc: `"gpus":["GPU-1","GPU-2"],"mig":[],"cpuset":""`,
		pod:   []ContainerRequest{{Name: "init", Init: true, Requests: map[string]int64{"nvidia.com/gpu": 1}}, gpuReq("main", 2)},
		ctr:   envvar("init", "GPU-0"),
		want: Plan{SetEnv: map[string]string{VisibleDevicesEnv: "GPU-1"},
			RemoveDevices: []Device{{Path: "/dev/nvidia0", Major: 195, Minor: 0}}, AddDevices: []Device{{Path: "/dev/nvidia1", Major: 195, Minor: 1}},
			Holding: alloc.Holding{GPUs: []string{"GPU-1"}}, AdjustsDevices: true},
	}, {
		name:  "MIG mixed strategy: the instance of the asked profile",
		alloc: `"gpus":[],"mig":[{"uuid":"MIG-a","profile":"1g.10gb","gpu":"GPU-3","start":0,"size":1},{"uuid":"MIG-b","profile":"3g.40gb","gpu":"GPU-3","start":4,"size":4}],"cpuset":""`,
		pod:   []ContainerRequest{{Name: "main", Requests: map[string]int64{"nvidia.com/mig-3g.40gb": 1}}},
		ctr:   Container{Name: "main", Env: []string{VisibleDevicesEnv + "=MIG-zzz"}},
		want: Plan{SetEnv: map[string]string{VisibleDevicesEnv: "MIG-b"},
			AddDevices: []Device{{Path: "/dev/nvidia3", Major: 195, Minor: 3}},
			Holding:    alloc.Holding{MIG: []string{"MIG-b"}}, AdjustsDevices: true},
	}, {
		name:  "MIG single strategy: nvidia.com/gpu names MIG devices",
		alloc: `"gpus":[],"mig":[{"uuid":"MIG-a","profile":"1g.10gb","gpu":"GPU-3","start":0,"size":1}],"cpuset":""`,
		pod:   []ContainerRequest{gpuReq("main", 1)},
		ctr:   Container{Name: "main", Env: []string{VisibleDevicesEnv + "=MIG-other"}},
		want: Plan{SetEnv: map[string]string{VisibleDevicesEnv: "MIG-a"},
			AddDevices: []Device{{Path: "/dev/nvidia3", Major: 195, Minor: 3}},
			Holding:    alloc.Holding{MIG: []string{"MIG-a"}}, AdjustsDevices: true},
	}, {
		name:  "replicas of a shared GPU",
		alloc: `"gpus":[],"mig":[],"replicas":[{"gpu":"GPU-1","count":2}],"cpuset":""`,
		pod:   []ContainerRequest{gpuReq("main", 2)},
		ctr:   envvar("main", "GPU-0"),
		want: Plan{SetEnv: map[string]string{VisibleDevicesEnv: "GPU-1"},
			RemoveDevices: []Device{{Path: "/dev/nvidia0", Major: 195, Minor: 0}}, AddDevices: []Device{{Path: "/dev/nvidia1", Major: 195, Minor: 1}},
			Holding: alloc.Holding{Replicas: []alloc.Replica{{GPU: "GPU-1", Count: 2}}}, AdjustsDevices: true},
	}, {
		name:  "volume-mounts strategy: markers replaced",
		alloc: `"gpus":["GPU-1"],"mig":[],"cpuset":""`,
		pod:   []ContainerRequest{gpuReq("main", 1)},
		ctr:   Container{Name: "main", Mounts: []Mount{{Destination: DeviceMarkerDir + "GPU-0", Source: "/dev/null"}, {Destination: "/data", Source: "/srv"}}},
		want: Plan{SetEnv: map[string]string{VisibleDevicesEnv: "GPU-1"},
			AddDevices:   []Device{{Path: "/dev/nvidia1", Major: 195, Minor: 1}},
			RemoveMounts: []string{DeviceMarkerDir + "GPU-0"}, AddMounts: []Mount{{Destination: DeviceMarkerDir + "GPU-1", Source: "/dev/null"}},
			Holding: alloc.Holding{GPUs: []string{"GPU-1"}}, AdjustsDevices: true},
	}, {
		name:  "CDI-resolved device nodes: only the GPU nodes change",
		alloc: `"gpus":["GPU-1"],"mig":[],"cpuset":""`,
		pod:   []ContainerRequest{gpuReq("main", 1)},
		ctr: Container{Name: "main", Env: []string{VisibleDevicesEnv + "=void"}, Devices: []Device{
			{Path: "/dev/nvidia0", Major: 195, Minor: 0}, {Path: "/dev/nvidia-uvm", Major: 508}, {Path: "/dev/nvidia-caps/nvidia-cap1", Major: 511, Minor: 1}}},
		want: Plan{SetEnv: map[string]string{VisibleDevicesEnv: "GPU-1"},
			RemoveDevices: []Device{{Path: "/dev/nvidia0", Major: 195, Minor: 0}}, AddDevices: []Device{{Path: "/dev/nvidia1", Major: 195, Minor: 1}},
			Holding: alloc.Holding{GPUs: []string{"GPU-1"}}, AdjustsDevices: true},
	}, {
		name:  "a GPU-less container the runtime gave a GPU loses it",
		alloc: `"gpus":[],"mig":[],"cpuset":"2"`,
		pod:   []ContainerRequest{{Name: "main"}},
		ctr:   envvar("main", "GPU-0"),
		want: Plan{CPUs: "2", Mems: "1", SetEnv: map[string]string{VisibleDevicesEnv: "void"},
			RemoveDevices: []Device{{Path: "/dev/nvidia0", Major: 195, Minor: 0}}, Holding: alloc.Holding{CPUSet: "2"}, AdjustsDevices: true},
	},
		// Faults: each names what is wrong.
		{name: "allocation for another node", alloc: `"node":"n2","gpus":[],"mig":[],"cpuset":""`,
			pod: []ContainerRequest{{Name: "main"}}, ctr: Container{Name: "main"}, wantErr: `allocation is for node "n2", this is node "n1"`},
		{name: "unknown GPU", alloc: `"gpus":["GPU-9"],"mig":[],"cpuset":""`,
			pod: []ContainerRequest{gpuReq("main", 1)}, ctr: Container{Name: "main"}, wantErr: "allocation names GPU GPU-9, which this node does not have (GPUs here: GPU-0, GPU-1, GPU-2, GPU-3)"},
		{name: "unknown shared GPU", alloc: `"gpus":[],"mig":[],"replicas":[{"gpu":"GPU-9","count":1}],"cpuset":""`,
			pod: []ContainerRequest{gpuReq("main", 1)}, ctr: Container{Name: "main"}, wantErr: "shared GPU GPU-9"},
		{name: "unknown MIG device", alloc: `"gpus":[],"mig":[{"uuid":"MIG-x","profile":"1g.10gb","gpu":"GPU-3","start":0,"size":1}],"cpuset":""`,
			pod: []ContainerRequest{gpuReq("main", 1)}, ctr: Container{Name: "main"}, wantErr: "MIG device MIG-x (1g.10gb on GPU-3), which this node does not have"},
		{name: "MIG device on an unknown GPU", alloc: `"gpus":[],"mig":[{"uuid":"MIG-a","profile":"1g.10gb","gpu":"GPU-7","start":0,"size":1}],"cpuset":""`,
			pod: []ContainerRequest{gpuReq("main", 1)}, ctr: Container{Name: "main"}, wantErr: "MIG device MIG-a on GPU GPU-7"},
		{name: "offline CPU", alloc: `"gpus":[],"mig":[],"cpuset":"6-9"`,
			pod: []ContainerRequest{{Name: "main"}}, ctr: Container{Name: "main"}, wantErr: "allocation cpuset 6-9 names CPU 8, which is not online here (online: 0-7)"},
		{name: "unknown NUMA node", alloc: `"gpus":[],"mig":[],"cpuset":"1","numaNodes":[3]`,
			pod: []ContainerRequest{{Name: "main"}}, ctr: Container{Name: "main"}, wantErr: "NUMA node 3, which this node does not have (NUMA nodes: 0-1)"},
		{name: "container asks more than allocated", alloc: `"gpus":["GPU-0"],"mig":[],"cpuset":""`,
			pod: []ContainerRequest{gpuReq("main", 2)}, ctr: Container{Name: "main"}, wantErr: `container "main": requests 1 more nvidia.com/gpu than the allocation holds`},
		{name: "MIG profile not allocated", alloc: `"gpus":[],"mig":[{"uuid":"MIG-a","profile":"1g.10gb","gpu":"GPU-3","start":0,"size":1}],"cpuset":""`,
			pod: []ContainerRequest{{Name: "main", Requests: map[string]int64{"nvidia.com/mig-3g.40gb": 1}}}, ctr: Container{Name: "main"}, wantErr: "requests 1 more nvidia.com/mig-3g.40gb"},
		{name: "container not in the spec", alloc: `"gpus":[],"mig":[],"cpuset":""`,
			pod: []ContainerRequest{{Name: "main"}}, ctr: Container{Name: "ghost"}, wantErr: `container "ghost" is not in the pod spec`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.alloc
			a := mustAlloc(t, strings.Replace(body, `"node":"n2",`, "", 1))
			if strings.Contains(body, `"node":"n2"`) {
				a.Node = "n2"
			}
			if strings.Contains(body, `"numaNodes":[3]`) {
				a.NUMANodes = []int{3}
			}
			got, err := Build(Input{NodeName: "n1", Allocation: a, Pod: tc.pod, Container: tc.ctr, Inventory: inv(), Resources: DefaultResources})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("plan\n got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}
