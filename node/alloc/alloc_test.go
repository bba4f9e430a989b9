package alloc

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixtures is the shared golden directory, also read by the extender's tests.
func fixtures(t *testing.T, kind, sub string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "test", "fixtures", kind, sub, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in test/fixtures/%s/%s: %v", kind, sub, err)
	}
	return files
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestAllocationGoldenValid(t *testing.T) {
	for _, f := range fixtures(t, "allocation", "valid") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := ParseAllocation(read(t, f)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAllocationGoldenInvalid(t *testing.T) {
	for _, f := range fixtures(t, "allocation", "invalid") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := read(t, strings.TrimSuffix(f, ".json")+".error")
			_, err := ParseAllocation(read(t, f))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one containing %q", err, want)
			}
			if !strings.HasPrefix(err.Error(), "allocation: ") {
				t.Errorf("error %q does not name the annotation", err)
			}
		})
	}
}

func TestAllocationFields(t *testing.T) {
	a, err := ParseAllocation(read(t, "../../test/fixtures/allocation/valid/whole-gpus-pinned.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.GPUs, []string{"GPU-a100-0002", "GPU-a100-0003"}) || a.CPUSet != "16-23" ||
		len(a.CPUs) != 8 || a.CPUs[0] != 16 || !reflect.DeepEqual(a.NUMANodes, []int{1}) || a.Level != "nvlink" {
		t.Errorf("decoded %+v", a)
	}
	m, err := ParseAllocation(read(t, "../../test/fixtures/allocation/valid/mig-mixed.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.MIGUUIDs(); len(got) != 2 || m.MIG[0].Profile != "3g.40gb" || m.MIG[0].GPU != "GPU-h100-0000" {
		t.Errorf("MIG %+v", m.MIG)
	}
}

func TestAllocationDRA(t *testing.T) {
	a, err := ParseAllocation(read(t, "../../test/fixtures/allocation/valid/dra-gpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := DRADevice{Claim: "ml/trainer-0-gpus-m4v8t", ClaimUID: "7a9b8c6d-5e4f-4a3b-9c2d-1e0f2a3b4c5d", Request: "gpus",
		Driver: "gpu.nvidia.com", Pool: "dra-a100-0", Device: "gpu-1", UUID: "GPU-cedc8ef5-2012-4e98-be22-5cdcb615ef10"}
	if a.DRA == nil || len(a.DRA.Devices) != 2 || a.DRA.Devices[1] != want {
		t.Fatalf("dra %+v, want two devices, the second %+v", a.DRA, want)
	}
	plain, err := ParseAllocation(read(t, "../../test/fixtures/allocation/valid/whole-gpus-pinned.json"))
	if err != nil || plain.DRA != nil {
		t.Errorf("allocation without dra: %+v, %v; want DRA nil", plain, err)
	}
	// A MIG device of a claim is named in mig; no request is allowed (the
	// claim's results always have one, but the schema does not require it).
	mig := `{"version":1,"node":"n","level":"node","mode":"best-effort","gpus":[],"gpuIndexes":[],` +
		`"mig":[{"uuid":"MIG-1","profile":"1g.10gb","gpu":"GPU-1","start":0,"size":1}],"cpuset":"","numaNodes":[],"memoryMiB":0,` +
		`"dra":{"devices":[{"claim":"ns/c","claimUID":"u","driver":"gpu.nvidia.com","pool":"n","device":"gpu-1-mig-1g10gb-19-0","uuid":"MIG-1"}]}}`
	if m, err := ParseAllocation(mig); err != nil || m.DRA.Devices[0].Request != "" {
		t.Errorf("MIG device of a claim: %+v, %v", m, err)
	}
	for in, wantErr := range map[string]string{
		strings.Replace(mig, `"uuid":"MIG-1"}]}}`, `"uuid":"MIG-2"}]}}`, 1): "dra.devices[0].uuid: MIG-2 is in neither gpus nor mig",
		strings.Replace(mig, `"claim":"ns/c"`, `"claim":"ns/c/d"`, 1):       `dra.devices[0].claim: "ns/c/d" is not namespace/name`,
		strings.Replace(mig, `"claim":"ns/c"`, `"claim":"/c"`, 1):           `dra.devices[0].claim: "/c" is not namespace/name`,
		strings.Replace(mig, `"driver":"gpu.nvidia.com"`, `"driver":""`, 1): "dra.devices[0].driver: empty",
		strings.Replace(mig, `"device":"gpu-1-mig-1g10gb-19-0",`, ``, 1):    "dra.devices[0].device: empty",
		`{"version":1,"node":"n","level":"node","mode":"best-effort","gpus":[],"gpuIndexes":[],"mig":[],"cpuset":"","numaNodes":[],"memoryMiB":0,"dra":{"devices":"gpu-0"}}`: "dra.devices: expected",
	} {
		if _, err := ParseAllocation(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: error %v, want %q", in, err, wantErr)
		}
	}
}

// The observed fixtures are written for the extender's decoder; the agent's
// encoder must produce what it accepts and read them back the same.
func TestObservedGolden(t *testing.T) {
	dir := filepath.Join("..", "..", "test", "fixtures", "observed")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("no observed fixtures")
	}
	for _, f := range fixtures(t, "observed", "valid") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			o, err := ParseObserved(read(t, f))
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseObserved(o.Encode())
			if err != nil {
				t.Fatalf("re-encoded %s: %v", o.Encode(), err)
			}
			if !reflect.DeepEqual(again.Holding.normalized(), o.Holding.normalized()) {
				t.Errorf("round trip changed the holding: %+v -> %+v", o.Holding, again.Holding)
			}
		})
	}
	for _, f := range fixtures(t, "observed", "invalid") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := ParseObserved(read(t, f)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestNewObservedUnion(t *testing.T) {
	o := NewObserved("n1", SourceNRI, []ContainerHolding{
		{Name: "a", Holding: Holding{GPUs: []string{"GPU-2"}, CPUSet: "4-5", Replicas: []Replica{{GPU: "GPU-9", Count: 1}}}},
		{Name: "b", Holding: Holding{GPUs: []string{"GPU-1"}, MIG: []string{"MIG-x"}, CPUSet: "6,7", Replicas: []Replica{{GPU: "GPU-9", Count: 2}}}},
	})
	want := Holding{GPUs: []string{"GPU-1", "GPU-2"}, MIG: []string{"MIG-x"}, Replicas: []Replica{{GPU: "GPU-9", Count: 3}}, CPUSet: "4-7"}
	if !reflect.DeepEqual(o.Holding, want) {
		t.Errorf("union %+v, want %+v", o.Holding, want)
	}
	text := o.Encode()
	back, err := ParseObserved(text)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	if back.Source != SourceNRI || len(back.Containers) != 2 || back.Containers[1].Name != "b" {
		t.Errorf("round trip %+v", back)
	}
	if e := NewObserved("n1", SourcePodResources, nil).Encode(); !strings.Contains(e, `"gpus":[]`) || !strings.Contains(e, `"cpuset":""`) {
		t.Errorf("empty observation %s: lists must be [] and cpuset \"\"", e)
	}
}

func TestObservedErrors(t *testing.T) {
	cases := map[string]string{
		`{"version":1,"node":"n","source":"kubelet","gpus":[],"mig":[],"cpuset":""}`:                                        `source: "kubelet"`,
		`{"version":1,"node":"n","source":"nri","gpus":[],"mig":[],"cpuset":"x"}`:                                           `cpuset: "x"`,
		`{"version":1,"node":"n","source":"nri","gpus":[""],"mig":[],"cpuset":""}`:                                          `gpus[0]: empty uuid`,
		`{"version":1,"node":"n","source":"nri","gpus":[],"mig":[],"cpuset":"","containers":[{"name":""}]}`:                 `containers[0].name: empty`,
		`{"version":1,"node":"n","source":"nri","gpus":[],"mig":[],"cpuset":"","containers":[{"name":"c","cpuset":"3-1"}]}`: `containers[0].cpuset`,
		`{"version":1,"node":"n","source":"nri","gpus":[],"mig":[]}`:                                                        `cpuset: required key missing`,
		`{"version":1,"node":"n","source":"nri","gpus":{},"mig":[],"cpuset":""}`:                                            `gpus: expected`,
	}
	for in, want := range cases {
		if _, err := ParseObserved(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
}

func TestCPUList(t *testing.T) {
	good := map[string]string{"": "", "0": "0", "0-3": "0-3", "3,1,2": "1-3", "0-1,1-4,9": "0-4,9", "8191": "8191"}
	for in, want := range good {
		ids, err := ParseCPUList(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := FormatCPUList(ids); got != want {
			t.Errorf("%q -> %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{",", "1,", "-1", "a", "3-1", "1-", "8192", "0x1", " 1", "1 -2"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
