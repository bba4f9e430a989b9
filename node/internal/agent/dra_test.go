package agent

import (
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"flextopo.dev/node/alloc"
	"flextopo.dev/node/internal/enforce"
)

// A pod whose two GPUs DRA chose from one template claim, as the extender
// writes it after DynamicResources' PreBind: GPU-0 and GPU-1 of node n1,
// CPUs 2-3 on NUMA node 0.
const (
	draClaimUID = "7a9b8c6d-5e4f-4a3b-9c2d-1e0f2a3b4c5d"
	cdiGPU0     = "k8s.gpu.nvidia.com/claim=" + draClaimUID + "-gpu-0"
	cdiGPU1     = "k8s.gpu.nvidia.com/claim=" + draClaimUID + "-gpu-1"
	cdiStray    = "k8s.gpu.nvidia.com/claim=0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d-gpu-2"
	allocDRA    = `{"version":1,"node":"n1","level":"numa","mode":"guaranteed","gpus":["GPU-0","GPU-1"],"gpuIndexes":[0,1],` +
		`"mig":[],"cpuset":"2-3","numaNodes":[0],"memoryMiB":0,"dra":{"devices":[` +
		`{"claim":"ml/trainer-gpus-m4v8t","claimUID":"` + draClaimUID + `","request":"gpus","driver":"gpu.nvidia.com","pool":"n1","device":"gpu-0","uuid":"GPU-0"},` +
		`{"claim":"ml/trainer-gpus-m4v8t","claimUID":"` + draClaimUID + `","request":"gpus","driver":"gpu.nvidia.com","pool":"n1","device":"gpu-1","uuid":"GPU-1"}]}}`
)

// draPod is the pod: a template claim "gpus" that the resourceclaim
// controller named trainer-gpus-m4v8t, used by container main; a sidecar
// without claims.
func draPod(name, uid string) *corev1.Pod {
	tmpl := "gpu-pair"
	generated := "trainer-gpus-m4v8t"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(uid),
			Annotations: map[string]string{alloc.AllocationAnnotation: allocDRA}},
		Spec: corev1.PodSpec{NodeName: "n1",
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: &tmpl}},
			Containers: []corev1.Container{
				{Name: "main", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}},
					Limits: corev1.ResourceList{"cpu": resource.MustParse("2")}}},
				{Name: "sidecar"},
			}},
		Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: &generated}}},
	}
}

// cdiContainer is container main as containerd hands it to NRI once it
// resolved the claim's CDI devices: their device nodes and the spec-wide
// NVIDIA_VISIBLE_DEVICES=void; reported lists the CDI devices in NRI's
// Container.CDIDevices (containerd >= 2.3 does, 2.2 does not).
func cdiContainer(id, sandboxID string, reported ...string) *api.Container {
	c := &api.Container{Id: id, PodSandboxId: sandboxID, Name: "main", State: api.ContainerState_CONTAINER_CREATED,
		Env: []string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=void"},
		Linux: &api.LinuxContainer{
			Devices: []*api.LinuxDevice{{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0},
				{Path: "/dev/nvidia1", Type: "c", Major: 195, Minor: 1}, {Path: "/dev/nvidiactl", Type: "c", Major: 195, Minor: 255}},
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-3"}},
		}}
	for _, name := range reported {
		c.CDIDevices = append(c.CDIDevices, &api.CDIDevice{Name: name})
	}
	return c
}

func TestRequestsResolvesClaims(t *testing.T) {
	named, generated := "shared-gpus", "p-gpus-x9z2q"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{
				{Name: "shared", ResourceClaimName: &named}, {Name: "gpus"}, {Name: "pending"}},
			InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
				Claims: []corev1.ResourceClaim{{Name: "shared", Request: "small"}}}}},
			Containers: []corev1.Container{
				{Name: "main", Resources: corev1.ResourceRequirements{
					Claims:   []corev1.ResourceClaim{{Name: "gpus"}, {Name: "pending"}},
					Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}},
				{Name: "other", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}}},
			},
		},
		Status: corev1.PodStatus{
			ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: &generated}, {Name: "pending"}},
			ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources-abcde",
				RequestMappings: []corev1.ContainerExtendedResourceRequest{
					{ContainerName: "main", ResourceName: "nvidia.com/gpu", RequestName: "container-1-request-0"},
					{ContainerName: "other", ResourceName: "nvidia.com/gpu", RequestName: "container-2-request-0"}}},
		},
	}
	want := map[string][]enforce.ClaimRef{
		"init": {{Claim: "ml/shared-gpus", Request: "small"}},
		// "pending" has no claim yet; the extended-resource request maps here.
		"main": {{Claim: "ml/p-gpus-x9z2q"}, {Claim: "ml/p-extended-resources-abcde", Request: "container-1-request-0"}},
		// Asking for zero of the resource takes nothing of the claim.
		"other": nil,
	}
	for _, c := range Requests(pod) {
		if !reflect.DeepEqual(c.Claims, want[c.Name]) {
			t.Errorf("%s: claims %+v, want %+v", c.Name, c.Claims, want[c.Name])
		}
	}
}

func TestNRIPluginDRAPod(t *testing.T) {
	running := draPod("running", "uid-running")
	fresh := draPod("fresh", "uid-fresh")
	r, sock := startRuntime(t, []*api.PodSandbox{sandbox(running)}, []*api.Container{cdiContainer("c-running", "sb-running", cdiGPU0, cdiGPU1)})
	rec := NewRecord()
	p := &Plugin{Node: "n1", Resources: enforce.DefaultResources, Inventory: testInventory, Record: rec,
		Pods: fakePods{"ml/running": running, "ml/fresh": fresh}, Log: quietLog(), Metrics: NewMetrics(nil)}
	connect(t, p, sock)

	// Synchronize: a running DRA container holds its cpuset and the CDI
	// devices the runtime reports, not units read from its device nodes.
	waitSynchronized(t, r, rec, "uid-running")
	if e := rec.Containers("uid-running")["main"]; len(e.GPUs) != 0 || e.CPUSet != "0-3" || !slices.Equal(e.CDIDevices, []string{cdiGPU0, cdiGPU1}) {
		t.Fatalf("synchronized %+v, want cpuset 0-3 and the two CDI devices", e)
	}

	resp, err := r.CreateContainer(context.Background(), &adaptation.CreateContainerRequest{
		Pod: sandbox(fresh), Container: cdiContainer("c-fresh", "sb-fresh", cdiGPU0, cdiGPU1)})
	if err != nil {
		t.Fatal(err)
	}
	adj := resp.GetAdjust()
	if cpu := adj.GetLinux().GetResources().GetCpu(); cpu.GetCpus() != "2-3" || cpu.GetMems() != "0" {
		t.Errorf("cpuset.cpus %q cpuset.mems %q, want the allocation's 2-3 and 0", cpu.GetCpus(), cpu.GetMems())
	}
	if len(adj.GetEnv()) != 0 || len(adj.GetLinux().GetDevices()) != 0 || len(adj.GetMounts()) != 0 ||
		len(adj.GetLinux().GetResources().GetDevices()) != 0 || len(adj.GetCDIDevices()) != 0 {
		t.Errorf("adjusted GPUs of a DRA pod: env %v devices %v mounts %v device rules %v CDI %v; want none",
			adj.GetEnv(), adj.GetLinux().GetDevices(), adj.GetMounts(), adj.GetLinux().GetResources().GetDevices(), adj.GetCDIDevices())
	}
	if e := rec.Containers("uid-fresh")["main"]; len(e.GPUs) != 0 || e.CPUSet != "2-3" || !slices.Equal(e.CDIDevices, []string{cdiGPU0, cdiGPU1}) {
		t.Errorf("recorded %+v, want cpuset 2-3 and the CDI devices", e)
	}
}

// prDRA is kubelet's PodResources report of the pod: container main with
// the CDI devices kubelet passed it (dynamicResources).
func prDRA(pod *corev1.Pod, cdi ...string) *podresourcesapi.PodResources {
	cr := &podresourcesapi.ClaimResource{DriverName: "gpu.nvidia.com", PoolName: "n1"}
	for _, n := range cdi {
		cr.CdiDevices = append(cr.CdiDevices, &podresourcesapi.CDIDevice{Name: n})
	}
	return &podresourcesapi.PodResources{Namespace: pod.Namespace, Name: pod.Name, Containers: []*podresourcesapi.ContainerResources{
		{Name: "main", DynamicResources: []*podresourcesapi.DynamicResource{{ClaimName: "trainer-gpus-m4v8t", ClaimNamespace: "ml",
			ClaimResources: []*podresourcesapi.ClaimResource{cr}}}},
		{Name: "sidecar"}}}
}

func TestObserveDRA(t *testing.T) {
	pod := draPod("p", "u")
	nri := func(cdi ...string) *Record {
		rec := NewRecord()
		rec.Applied(PodKey{"ml", "p", "u"}, "main", Entry{Holding: alloc.Holding{CPUSet: "2-3"}, CDIDevices: cdi})
		rec.Applied(PodKey{"ml", "p", "u"}, "sidecar", Entry{Holding: alloc.Holding{CPUSet: "2-3"}})
		return rec
	}
	for _, tc := range []struct {
		name      string
		rec       *Record
		pr        *podresourcesapi.PodResources
		source    string
		gpus      []string
		cpuset    string
		drift     bool
		notes     []string
		enforcing bool
	}{
		{name: "CDI devices from NRI (containerd >= 2.3)", rec: nri(cdiGPU1, cdiGPU0), source: "nri",
			gpus: []string{"GPU-0", "GPU-1"}, cpuset: "2-3"},
		{name: "NRI reports none: kubelet's PodResources says", rec: nri(), pr: prDRA(pod, cdiGPU0, cdiGPU1), source: "nri",
			gpus: []string{"GPU-0", "GPU-1"}, cpuset: "2-3"},
		{name: "a GPU claim device the allocation does not list, one it lists missing", rec: nri(cdiGPU0, cdiStray), source: "nri",
			gpus: []string{"GPU-0", cdiStray}, cpuset: "2-3", drift: true, notes: []string{
				"container main has CDI device " + cdiStray + ", which the allocation does not list",
				"container main lacks CDI device " + cdiGPU1 + " of its claims"}},
		{name: "kubelet passed no CDI device", rec: nri(), pr: prDRA(pod), source: "nri", cpuset: "2-3", drift: true,
			notes: []string{"container main lacks CDI device " + cdiGPU0 + " of its claims", "container main lacks CDI device " + cdiGPU1 + " of its claims"}},
		{name: "neither knows the container: the allocation's devices", rec: nri(), source: "nri",
			gpus: []string{"GPU-0", "GPU-1"}, cpuset: "2-3"},
		{name: "observe mode: kubelet's devices, kubelet's (unpinned) CPUs", rec: NewRecord(), pr: prDRA(pod, cdiGPU0, cdiGPU1),
			source: "podresources", gpus: []string{"GPU-0", "GPU-1"}, drift: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reporter{Node: "n1", Record: tc.rec, Resources: enforce.DefaultResources, Log: quietLog(), Metrics: NewMetrics(nil)}
			o, notes := r.observe(pod, tc.pr)
			if o == nil {
				t.Fatal("no observation")
			}
			if o.Source != tc.source || !slices.Equal(o.GPUs, tc.gpus) || len(o.MIG) != 0 || o.CPUSet != tc.cpuset {
				t.Errorf("observed %s gpus %v mig %v cpuset %q; want %s %v [] %q", o.Source, o.GPUs, o.MIG, o.CPUSet, tc.source, tc.gpus, tc.cpuset)
			}
			if Drifted(pod, o) != tc.drift {
				t.Errorf("drifted %v, want %v", !tc.drift, tc.drift)
			}
			if !slices.Equal(notes, tc.notes) {
				t.Errorf("notes %q, want %q", notes, tc.notes)
			}
			if _, err := alloc.ParseObserved(o.Encode()); err != nil {
				t.Errorf("the extender's reader would refuse %s: %v", o.Encode(), err)
			}
		})
	}
}

// The drift of a DRA pod as the agent writes it is a golden observed
// fixture, which the extender's decoder reads too (test_observed.c): the
// unknown claim device is a unit the extender cannot place.
func TestDRADriftGolden(t *testing.T) {
	pod := draPod("p", "u")
	rec := NewRecord()
	rec.Applied(PodKey{"ml", "p", "u"}, "main", Entry{Holding: alloc.Holding{CPUSet: "2-3"}, CDIDevices: []string{cdiGPU0, cdiStray}})
	client := fake.NewSimpleClientset(pod.DeepCopy())
	m := NewMetrics(nil)
	r := &Reporter{Node: "n1", Client: client, Pods: listPods{pod}, Record: rec, Resources: enforce.DefaultResources,
		Log: quietLog(), Metrics: m}
	r.Reconcile(context.Background())
	got, err := client.CoreV1().Pods("ml").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../../test/fixtures/observed/valid/dra-unknown-cdi-device.json")
	if err != nil {
		t.Fatal(err)
	}
	if value := got.Annotations[alloc.ObservedAnnotation]; value != strings.TrimSpace(string(want)) {
		t.Errorf("observed\n%s\nwant (test/fixtures/observed/valid/dra-unknown-cdi-device.json)\n%s", value, want)
	}
	if g := gaugeValue(t, m); g != 1 {
		t.Errorf("drift gauge %v, want 1", g)
	}
}
