package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"sigs.k8s.io/yaml"
)

const fixtures = "../../fixtures/dra"

// fixtureObject reads one object of a fixture (a List's item by kind and
// name, or the file's object).
func fixtureObject(t *testing.T, file, kind, name string, into any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtures, file))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	objs := list.Items
	if list.Kind != "List" {
		objs = []json.RawMessage{raw}
	}
	for _, o := range objs {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(o, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind == kind && meta.Metadata.Name == name {
			if err := json.Unmarshal(o, into); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s: no %s %s", file, kind, name)
}

// a100 is GPU 0 of the fixtures' dra-a100-0 (a DGX A100, bus 07, NUMA 0).
func a100() GPU {
	return GPU{UUID: "GPU-c4f82fda-f11d-4492-a176-950eab898aad", Minor: 0, NUMANode: 0, PCIBusID: "0000:07:00.0",
		ProductName: "NVIDIA A100-SXM4-80GB", Memory: "80Gi"}
}

func mustComplete(t *testing.T, gpus ...GPU) *Config {
	t.Helper()
	cfg := &Config{GPUs: gpus}
	if err := cfg.complete(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Every attribute and capacity the stand-in publishes is the one NVIDIA's
// driver published for the same GPU, value and type alike.
func TestDeviceIsShapedLikeNvidias(t *testing.T) {
	var slice resourceapi.ResourceSlice
	fixtureObject(t, "resourceslice-a100-8x.json", "ResourceSlice", "00000-gpu.nvidia.com-dra-a100-0-x7k9q", &slice)
	want := slice.Spec.Devices[0]
	got := mustComplete(t, a100()).GPUs[0].Device()
	if got.Name != want.Name {
		t.Errorf("device name %q, want %q", got.Name, want.Name)
	}
	for name, attr := range got.Attributes {
		w, ok := want.Attributes[name]
		if !ok {
			t.Errorf("attribute %s: NVIDIA's driver does not publish it", name)
			continue
		}
		if !reflect.DeepEqual(attr, w) {
			g, _ := json.Marshal(attr)
			n, _ := json.Marshal(w)
			t.Errorf("attribute %s: %s, NVIDIA's driver publishes %s", name, g, n)
		}
	}
	for _, name := range []resourceapi.QualifiedName{"type", "uuid", "productName", "resource.kubernetes.io/pciBusID",
		"resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode"} {
		if _, ok := got.Attributes[name]; !ok {
			t.Errorf("attribute %s missing", name)
		}
	}
	if g, w := got.Capacity["memory"].Value, want.Capacity["memory"].Value; g.Cmp(w) != 0 || len(got.Capacity) != 1 {
		t.Errorf("capacity %v, want memory %s only", got.Capacity, w.String())
	}
}

func TestResourcesOnePoolPerNode(t *testing.T) {
	g1 := GPU{UUID: "GPU-e2e-1", Minor: 1, NUMANode: -1, PCIBusID: "0000:02:00.0", PCIeRoot: "pci0000:40"}
	g0 := GPU{UUID: "GPU-e2e-0", Minor: 0, NUMANode: 1, PCIBusID: "0001:01:00.0"}
	res := mustComplete(t, g1, g0).Resources("node-a")
	if len(res.Pools) != 1 || len(res.Pools["node-a"].Slices) != 1 {
		t.Fatalf("pools %+v, want one pool node-a with one slice", res.Pools)
	}
	devs := res.Pools["node-a"].Slices[0].Devices
	if len(devs) != 2 || devs[0].Name != "gpu-0" || devs[1].Name != "gpu-1" {
		t.Fatalf("devices %+v, want gpu-0 then gpu-1", devs)
	}
	if root := *devs[0].Attributes["resource.kubernetes.io/pcieRoot"].StringValue; root != "pci0001:00" {
		t.Errorf("default pcieRoot %q, want pci0001:00 (the bus id's domain)", root)
	}
	if n := devs[0].Attributes["resource.kubernetes.io/numaNode"].IntValue; n == nil || *n != 1 {
		t.Errorf("gpu-0 numaNode %v, want int 1", n)
	}
	if _, ok := devs[1].Attributes["resource.kubernetes.io/numaNode"]; ok {
		t.Error("gpu-1 has numaNode; an unknown NUMA node (-1) leaves it out, as NVIDIA's driver does")
	}
	mem := devs[1].Capacity["memory"].Value
	if p := *devs[1].Attributes["productName"].StringValue; p != defaultProduct || mem.String() != defaultMemory {
		t.Errorf("defaults: productName %q memory %s, want %q %s", p, mem.String(), defaultProduct, defaultMemory)
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		`gpus: []`: "gpus: none listed",
		`gpus: [{uuid: a, minor: 0, pciBusID: "0000:01:00.0"}, {uuid: b, minor: 0, pciBusID: "0000:02:00.0"}]`: "gpus[1].minor: 0 listed twice",
		`gpus: [{uuid: a, minor: 0, pciBusID: "0000:01:00.0"}, {uuid: a, minor: 1, pciBusID: "0000:02:00.0"}]`: "gpus[1].uuid: a listed twice",
		`gpus: [{minor: 0, pciBusID: "0000:01:00.0"}]`:                                                         "gpus[0].uuid: empty",
		`gpus: [{uuid: a, minor: 0}]`:                                         "gpus[0].pciBusID: empty",
		`gpus: [{uuid: a, minor: 0, pciBusID: "07"}]`:                         `gpus[0].pciBusID: "07" is not`,
		`gpus: [{uuid: a, minor: 0, pciBusID: "0000:01:00.0", memory: lots}]`: `gpus[0].memory: "lots"`,
		`gpus: [{uuid: a, minor: 0, pciBusID: "0000:01:00.0", numa: 1}]`:      `unknown field "numa"`,
	} {
		path := filepath.Join(dir, "gpus.yaml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readConfig(path); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming the file and %q", body, err, want)
		}
	}
}

// trainerClaim is the fixtures' claim of two A100s, allocated by
// kube-scheduler, with a result of another driver added.
func trainerClaim(t *testing.T) *resourceapi.ResourceClaim {
	t.Helper()
	claim := &resourceapi.ResourceClaim{}
	fixtureObject(t, "claim-template-pod.json", "ResourceClaim", "trainer-0-gpus-m4v8t", claim)
	claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results,
		resourceapi.DeviceRequestAllocationResult{Request: "nic", Driver: "nic.example.com", Pool: "dra-a100-0", Device: "eth0"})
	return claim
}

func a100Node(t *testing.T, cdiRoot string) *Driver {
	t.Helper()
	g1 := a100()
	g1.UUID, g1.Minor, g1.PCIBusID = "GPU-cedc8ef5-2012-4e98-be22-5cdcb615ef10", 1, "0000:0f:00.0"
	g0 := a100()
	g0.DevicePath = "/work/dev/nvidia0"
	return NewDriver("dra-a100-0", cdiRoot, mustComplete(t, g0, g1), nil)
}

func TestPrepareWritesTheClaimsCDISpec(t *testing.T) {
	root := t.TempDir()
	d := a100Node(t, root)
	claim := trainerClaim(t)
	const uid = "7a9b8c6d-5e4f-4a3b-9c2d-1e0f2a3b4c5d"
	res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	if err != nil || res[uid].Err != nil {
		t.Fatalf("prepare: %v, %v", err, res[uid].Err)
	}
	want := []kubeletplugin.Device{
		{Requests: []string{"gpus"}, PoolName: "dra-a100-0", DeviceName: "gpu-0", CDIDeviceIDs: []string{"k8s.gpu.nvidia.com/claim=" + uid + "-gpu-0"}},
		{Requests: []string{"gpus"}, PoolName: "dra-a100-0", DeviceName: "gpu-1", CDIDeviceIDs: []string{"k8s.gpu.nvidia.com/claim=" + uid + "-gpu-1"}},
	}
	if !reflect.DeepEqual(res[uid].Devices, want) {
		t.Errorf("devices\n got %+v\nwant %+v", res[uid].Devices, want)
	}

	path := filepath.Join(root, "k8s.gpu.nvidia.com-claim_"+uid+".yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := yaml.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	wantSpec := map[string]any{
		"cdiVersion":     "0.5.0",
		"kind":           "k8s.gpu.nvidia.com/claim",
		"containerEdits": map[string]any{"env": []any{"NVIDIA_VISIBLE_DEVICES=void"}},
		"devices": []any{
			map[string]any{"name": uid + "-gpu-0", "containerEdits": map[string]any{
				"env":         []any{"GPU_DEVICE_0=GPU-c4f82fda-f11d-4492-a176-950eab898aad"},
				"deviceNodes": []any{map[string]any{"path": "/dev/nvidia0", "hostPath": "/work/dev/nvidia0"}}}},
			map[string]any{"name": uid + "-gpu-1", "containerEdits": map[string]any{
				"env":         []any{"GPU_DEVICE_1=GPU-cedc8ef5-2012-4e98-be22-5cdcb615ef10"},
				"deviceNodes": []any{map[string]any{"path": "/dev/nvidia1", "hostPath": "/dev/nvidia1"}}}},
		},
	}
	if !reflect.DeepEqual(spec, wantSpec) {
		t.Errorf("CDI spec %s:\n%s\nwant %+v", path, raw, wantSpec)
	}
	// Each CDI device id resolves into the spec: <kind>=<a device's name>.
	for _, dev := range res[uid].Devices {
		kind, name, _ := strings.Cut(dev.CDIDeviceIDs[0], "=")
		if kind != spec["kind"] || !strings.Contains(string(raw), "name: "+name) {
			t.Errorf("CDI device %s is not in the spec", dev.CDIDeviceIDs[0])
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 1 {
		t.Errorf("CDI root holds %d files, want the spec alone", len(entries))
	}

	// Unprepare removes it, and again is not an error.
	obj := []kubeletplugin.NamespacedObject{{UID: types.UID(uid)}}
	for i := 0; i < 2; i++ {
		errs, err := d.UnprepareResourceClaims(context.Background(), obj)
		if err != nil || errs[uid] != nil {
			t.Fatalf("unprepare #%d: %v, %v", i+1, err, errs[uid])
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after unprepare: %v", path, err)
	}
}

func TestPrepareRefusesWhatItCannotServe(t *testing.T) {
	root := t.TempDir()
	d := a100Node(t, root)
	unallocated := trainerClaim(t)
	unallocated.UID, unallocated.Status.Allocation = "u-1", nil
	unknown := trainerClaim(t)
	unknown.UID = "u-2"
	unknown.Status.Allocation.Devices.Results[1].Device = "gpu-7"
	elsewhere := trainerClaim(t)
	elsewhere.UID = "u-3"
	for i := range elsewhere.Status.Allocation.Devices.Results {
		elsewhere.Status.Allocation.Devices.Results[i].Pool = "dra-a100-1"
	}
	res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{unallocated, unknown, elsewhere})
	if err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[types.UID]string{
		"u-1": "claim ml/trainer-0-gpus-m4v8t (uid u-1): not allocated",
		"u-2": "claim ml/trainer-0-gpus-m4v8t (uid u-2): request gpus: device gpu-7 is not a GPU of pool dra-a100-0",
		"u-3": "no device of driver gpu.nvidia.com in pool dra-a100-0",
	} {
		if e := res[uid].Err; e == nil || !strings.Contains(e.Error(), want) || res[uid].Devices != nil {
			t.Errorf("claim %s: %+v, want error %q and no devices", uid, res[uid], want)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("a refused claim left %d files in the CDI root", len(entries))
	}
}

func TestFatalErrorsStopTheDriver(t *testing.T) {
	var got error
	d := &Driver{Fatal: func(err error) { got = err }}
	d.HandleError(context.Background(), errors.New("retry me"), "publish")
	if got == nil || !strings.Contains(got.Error(), "publish: retry me") {
		t.Errorf("fatal error %v, want it handed to Fatal", got)
	}
	got = nil
	d.HandleError(context.Background(), recoverable{errors.New("slow")}, "publish")
	if got != nil {
		t.Errorf("recoverable error stopped the driver: %v", got)
	}
}

// recoverable is an error the helper marks as recoverable.
type recoverable struct{ error }

func (recoverable) Is(target error) bool { return target == kubeletplugin.ErrRecoverable }
