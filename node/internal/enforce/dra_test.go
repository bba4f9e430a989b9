package enforce

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"flextopo.dev/node/alloc"
)

const (
	draClaim = "ml/trainer-0-gpus-m4v8t"
	draUID   = "7a9b8c6d-5e4f-4a3b-9c2d-1e0f2a3b4c5d"
	draGPU0  = "GPU-c4f82fda-f11d-4492-a176-950eab898aad"
	draGPU1  = "GPU-cedc8ef5-2012-4e98-be22-5cdcb615ef10"
)

// draGolden is the golden allocation of two DRA-chosen A100s (the
// extender's contract, test/fixtures/allocation/valid/dra-gpus.json).
func draGolden(t *testing.T) *alloc.Allocation {
	t.Helper()
	raw, err := os.ReadFile("../../../test/fixtures/allocation/valid/dra-gpus.json")
	if err != nil {
		t.Fatal(err)
	}
	a, err := alloc.ParseAllocation(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// cdiInjected is a container as containerd hands it to NRI after resolving
// NVIDIA's claim CDI devices for GPUs 0 and 1: their device nodes, the
// control nodes and the spec-wide NVIDIA_VISIBLE_DEVICES=void.
func cdiInjected(name string) Container {
	return Container{Name: name,
		Env: []string{"PATH=/bin", VisibleDevicesEnv + "=void"},
		Devices: []Device{{Path: "/dev/nvidia0", Major: 195, Minor: 0}, {Path: "/dev/nvidia1", Major: 195, Minor: 1},
			{Path: "/dev/nvidiactl", Major: 195, Minor: 255}, {Path: "/dev/nvidia-uvm", Major: 508}},
		Mounts: []Mount{{Destination: "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05", Source: "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05"}}}
}

func draInventory() *Inventory {
	inv := inv() // GPUs of another node: DRA's GPUs are not the agent's to check
	inv.NUMANodes = map[int]bool{0: true}
	return inv
}

func TestBuildDRAOnlyPinsCPUs(t *testing.T) {
	a := draGolden(t)
	trainer := ContainerRequest{Name: "trainer", Claims: []ClaimRef{{Claim: draClaim}}}
	// A KEP-5004 pod asks nvidia.com/gpu and gets it through a claim: the
	// device plugin's split does not apply.
	extended := ContainerRequest{Name: "trainer", Requests: map[string]int64{"nvidia.com/gpu": 2},
		Claims: []ClaimRef{{Claim: "ml/trainer-0-extended-resources-x7k2p", Request: "container-0-request-0"}}}
	sidecar := ContainerRequest{Name: "sidecar"}
	foreign := Container{Name: "trainer", Env: []string{VisibleDevicesEnv + "=GPU-0"},
		Devices: []Device{{Path: "/dev/nvidia3", Major: 195, Minor: 3}},
		Mounts:  []Mount{{Destination: DeviceMarkerDir + "GPU-0", Source: "/dev/null"}}}
	want := Plan{CPUs: "0-7", Mems: "0", SetEnv: map[string]string{}, Holding: alloc.Holding{CPUSet: "0-7"}}
	for _, tc := range []struct {
		name string
		pod  []ContainerRequest
		ctr  Container
	}{
		{"CDI-injected GPUs are left as the runtime set them", []ContainerRequest{trainer, sidecar}, cdiInjected("trainer")},
		{"a container without claims is pinned too", []ContainerRequest{trainer, sidecar}, Container{Name: "sidecar"}},
		{"extended resource backed by DRA: no device plugin split", []ContainerRequest{extended}, cdiInjected("trainer")},
		{"GPU nodes, env and markers the allocation does not name are not stripped", []ContainerRequest{trainer}, foreign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Build(Input{NodeName: "dra-a100-0", Allocation: a, Pod: tc.pod, Container: tc.ctr,
				Inventory: draInventory(), Resources: DefaultResources})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("plan\n got %+v\nwant %+v (cpuset and mems only)", *got, want)
			}
		})
	}
}

func TestBuildDRAFaults(t *testing.T) {
	pod := []ContainerRequest{{Name: "trainer", Claims: []ClaimRef{{Claim: draClaim}}}}
	for _, tc := range []struct {
		name, node, want string
		edit             func(*alloc.Allocation, *Inventory)
		ctr              string
	}{
		{"another node", "n1", `allocation is for node "dra-a100-0", this is node "n1"`, nil, "trainer"},
		{"offline CPU", "dra-a100-0", "allocation cpuset 0-7 names CPU 7, which is not online here (online: 0-6)",
			func(_ *alloc.Allocation, inv *Inventory) { delete(inv.CPUs, 7) }, "trainer"},
		{"unknown NUMA node", "dra-a100-0", "allocation names NUMA node 0, which this node does not have (NUMA nodes: 1)",
			func(_ *alloc.Allocation, inv *Inventory) { inv.NUMANodes = map[int]bool{1: true} }, "trainer"},
		{"container not in the spec", "dra-a100-0", `container "ghost" is not in the pod spec`, nil, "ghost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, inv := draGolden(t), draInventory()
			if tc.edit != nil {
				tc.edit(a, inv)
			}
			_, err := Build(Input{NodeName: tc.node, Allocation: a, Pod: pod, Container: cdiInjected(tc.ctr), Inventory: inv, Resources: DefaultResources})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// twoClaims is an allocation with two claims: one with requests a (GPU 0)
// and b (a MIG device), one of a prioritized list (subrequest of request
// gpu) holding GPU 1.
func twoClaims(t *testing.T) *alloc.Allocation {
	t.Helper()
	a, err := alloc.ParseAllocation(`{"version":1,"node":"n1","level":"node","mode":"best-effort",` +
		`"gpus":["GPU-0","GPU-1"],"gpuIndexes":[0,1],` +
		`"mig":[{"uuid":"MIG-a","profile":"1g.10gb","gpu":"GPU-3","start":0,"size":1}],"cpuset":"","numaNodes":[],"memoryMiB":0,` +
		`"dra":{"devices":[` +
		`{"claim":"ns/one","claimUID":"11111111-1111-1111-1111-111111111111","request":"a","driver":"gpu.nvidia.com","pool":"n1","device":"gpu-0","uuid":"GPU-0"},` +
		`{"claim":"ns/one","claimUID":"11111111-1111-1111-1111-111111111111","request":"b","driver":"gpu.nvidia.com","pool":"n1","device":"gpu-3-mig-1g10gb-19-0","uuid":"MIG-a"},` +
		`{"claim":"ns/two","claimUID":"22222222-2222-2222-2222-222222222222","request":"gpu/big","driver":"gpu.nvidia.com","pool":"n1","device":"gpu-1","uuid":"GPU-1"}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

const (
	cdiOneA = "k8s.gpu.nvidia.com/claim=11111111-1111-1111-1111-111111111111-gpu-0"
	cdiOneB = "k8s.gpu.nvidia.com/claim=11111111-1111-1111-1111-111111111111-gpu-3-mig-1g10gb-19-0"
	cdiTwo  = "k8s.gpu.nvidia.com/claim=22222222-2222-2222-2222-222222222222-gpu-1"
)

func TestContainerDevices(t *testing.T) {
	a := twoClaims(t)
	names := func(ds []alloc.DRADevice) []string {
		var out []string
		for _, d := range ds {
			out = append(out, CDIName(d))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		claims []ClaimRef
		want   []string
	}{
		{"whole claim", []ClaimRef{{Claim: "ns/one"}}, []string{cdiOneA, cdiOneB}},
		{"one request", []ClaimRef{{Claim: "ns/one", Request: "b"}}, []string{cdiOneB}},
		{"a subrequest's device serves its request", []ClaimRef{{Claim: "ns/two", Request: "gpu"}}, []string{cdiTwo}},
		{"a subrequest is not named by the container", []ClaimRef{{Claim: "ns/two", Request: "big"}}, nil},
		{"claim of another namespace", []ClaimRef{{Claim: "other/one"}}, nil},
		{"two claims, each device once", []ClaimRef{{Claim: "ns/two"}, {Claim: "ns/one", Request: "a"}, {Claim: "ns/one"}},
			[]string{cdiOneA, cdiOneB, cdiTwo}},
		{"no claims", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(ContainerDevices(a, ContainerRequest{Name: "c", Claims: tc.claims})); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("devices %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckCDI(t *testing.T) {
	a := twoClaims(t)
	both := ContainerRequest{Name: "c", Claims: []ClaimRef{{Claim: "ns/one"}, {Claim: "ns/two"}}}
	const (
		stray    = "k8s.gpu.nvidia.com/claim=33333333-3333-3333-3333-333333333333-gpu-2"
		strayMIG = "k8s.gpu.nvidia.com/claim=33333333-3333-3333-3333-333333333333-gpu-2-mig-3g40gb-9-4"
	)
	for _, tc := range []struct {
		name string
		c    ContainerRequest
		cdi  []string
		want CDICheck
	}{
		{"every device of its claims", both, []string{cdiTwo, cdiOneA, cdiOneB},
			CDICheck{GPUs: []string{"GPU-1", "GPU-0"}, MIG: []string{"MIG-a"}}},
		{"other kinds are not the allocation's units", ContainerRequest{Name: "c", Claims: []ClaimRef{{Claim: "ns/one", Request: "a"}}},
			[]string{cdiOneA, "nvidia.com/gpu=GPU-9", "k8s.nic.example.com/claim=11111111-1111-1111-1111-111111111111-eth0"},
			CDICheck{GPUs: []string{"GPU-0"}}},
		{"a device of its claims missing", both, []string{cdiOneA, cdiTwo},
			CDICheck{GPUs: []string{"GPU-0", "GPU-1"}, Missing: []string{cdiOneB}}},
		{"a GPU claim device the allocation does not list", both, []string{cdiOneA, cdiOneB, cdiTwo, stray, strayMIG, stray},
			CDICheck{GPUs: []string{"GPU-0", "GPU-1", stray}, MIG: []string{"MIG-a", strayMIG}, Unknown: []string{stray, strayMIG}}},
		{"a listed device of another container's claim is held, not unknown", ContainerRequest{Name: "c"}, []string{cdiTwo},
			CDICheck{GPUs: []string{"GPU-1"}}},
		{"nothing reported", both, nil, CDICheck{Missing: []string{cdiOneA, cdiOneB, cdiTwo}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckCDI(a, tc.c, tc.cdi)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("check\n got %+v\nwant %+v", got, tc.want)
			}
			if got.Drifted() != (len(tc.want.Unknown)+len(tc.want.Missing) > 0) {
				t.Errorf("Drifted() = %v", got.Drifted())
			}
		})
	}
	plain := mustAlloc(t, `"gpus":["GPU-0"],"mig":[],"cpuset":""`)
	if got := CheckCDI(plain, both, []string{cdiOneA}); !reflect.DeepEqual(got, CDICheck{}) {
		t.Errorf("allocation without dra: %+v, want nothing", got)
	}
}
