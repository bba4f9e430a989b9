package agent

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"flextopo.dev/node/alloc"
	"flextopo.dev/node/internal/enforce"
)

func TestFromPodResources(t *testing.T) {
	res := enforce.Resources{GPU: "nvidia.com/gpu", MIGPrefix: "nvidia.com/mig-", Shared: "nvidia.com/gpu.shared"}
	c := &podresourcesapi.ContainerResources{Name: "main", CpuIds: []int64{5, 4, 7},
		Devices: []*podresourcesapi.ContainerDevices{
			{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-b", "GPU-a", "GPU-c::1", "GPU-c::3"}},
			{ResourceName: "nvidia.com/mig-1g.10gb", DeviceIds: []string{"MIG-x"}},
			{ResourceName: "nvidia.com/gpu.shared", DeviceIds: []string{"GPU-d"}},
			{ResourceName: "example.com/nic", DeviceIds: []string{"eth9"}},
		}}
	got := FromPodResources(c, res)
	want := alloc.Holding{GPUs: []string{"GPU-a", "GPU-b"}, MIG: []string{"MIG-x"},
		Replicas: []alloc.Replica{{GPU: "GPU-c", Count: 2}, {GPU: "GPU-d", Count: 1}}, CPUSet: "4-5,7"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

type listPods []*corev1.Pod

func (l listPods) List() []*corev1.Pod { return l }

type staticPR []*podresourcesapi.PodResources

func (s staticPR) List(context.Context) ([]*podresourcesapi.PodResources, error) { return s, nil }

func prOf(ns, name string, gpus []string, cpus ...int64) *podresourcesapi.PodResources {
	return &podresourcesapi.PodResources{Namespace: ns, Name: name, Containers: []*podresourcesapi.ContainerResources{{
		Name: "main", CpuIds: cpus, Devices: []*podresourcesapi.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: gpus}}}}}
}

func TestReconcileWritesObserved(t *testing.T) {
	enforced := gpuPod("ns", "enforced", "u1", 1, allocGPU1)
	drifted := gpuPod("ns", "drifted", "u2", 1, allocGPU1)
	unmanaged := gpuPod("ns", "unmanaged", "u3", 1, "")
	idle := gpuPod("ns", "idle", "u4", 0, "")
	idle.Spec.Containers[0].Resources.Limits = nil
	current := gpuPod("ns", "current", "u5", 1, allocGPU1)
	pods := []*corev1.Pod{enforced, drifted, unmanaged, idle, current}
	objs := make([]runtimeObject, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p.DeepCopy())
	}
	client := fake.NewSimpleClientset(objs...)
	rec := NewRecord()
	rec.Applied(PodKey{"ns", "enforced", "u1"}, "main", Entry{Holding: alloc.Holding{GPUs: []string{"GPU-1"}, CPUSet: "2-3"}})
	rec.Applied(PodKey{"ns", "current", "u5"}, "main", Entry{Holding: alloc.Holding{GPUs: []string{"GPU-1"}, CPUSet: "2-3"}})
	current.Annotations[alloc.ObservedAnnotation] = alloc.NewObserved("n1", alloc.SourceNRI,
		[]alloc.ContainerHolding{{Name: "main", Holding: alloc.Holding{GPUs: []string{"GPU-1"}, CPUSet: "2-3"}}}).Encode()

	m := NewMetrics(nil)
	r := &Reporter{Node: "n1", Client: client, Pods: listPods(pods), Record: rec, Resources: enforce.DefaultResources,
		PodResources: staticPR{
			prOf("ns", "enforced", []string{"GPU-0"}, 0, 1), // kubelet's own view differs: NRI's record wins
			prOf("ns", "drifted", []string{"GPU-0"}, 0, 1),
			prOf("ns", "unmanaged", []string{"GPU-1"}),
			prOf("ns", "idle", nil),
		}, Log: quietLog(), Metrics: m}
	r.Reconcile(context.Background())

	get := func(name string) *alloc.Observed {
		p, err := client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		text, ok := p.Annotations[alloc.ObservedAnnotation]
		if !ok {
			return nil
		}
		o, err := alloc.ParseObserved(text)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return o
	}
	if o := get("enforced"); o == nil || o.Source != alloc.SourceNRI || !reflect.DeepEqual(o.GPUs, []string{"GPU-1"}) || o.CPUSet != "2-3" {
		t.Errorf("enforced: %+v, want nri GPU-1 2-3", o)
	}
	if o := get("drifted"); o == nil || o.Source != alloc.SourcePodResources || !reflect.DeepEqual(o.GPUs, []string{"GPU-0"}) || o.CPUSet != "0-1" {
		t.Errorf("drifted: %+v, want podresources GPU-0 0-1", o)
	}
	if o := get("unmanaged"); o == nil || !reflect.DeepEqual(o.GPUs, []string{"GPU-1"}) {
		t.Errorf("unmanaged: %+v, want GPU-1 reported", o)
	}
	if o := get("idle"); o != nil {
		t.Errorf("idle pod annotated: %+v", o)
	}
	writes := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			writes++
		}
	}
	if writes != 3 {
		t.Errorf("%d patches, want 3 (the current annotation is not rewritten)", writes)
	}
	if got := gaugeValue(t, m); got != 2 {
		t.Errorf("drift gauge %v, want 2 (drifted, unmanaged)", got)
	}
}

// In enforce mode a pod with an allocation is reported only once a container
// of it exists: before, PodResources holds the device plugin's choice, which
// the plugin replaces at CreateContainer.
func TestEnforcingWaitsForContainers(t *testing.T) {
	pending := gpuPod("ns", "pending", "u1", 1, allocGPU1)
	started := gpuPod("ns", "started", "u2", 1, allocGPU1)
	started.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", ContainerID: "containerd://c1"}}
	unmanaged := gpuPod("ns", "unmanaged", "u3", 1, "")
	pr := map[string]*podresourcesapi.PodResources{}
	for _, p := range []*podresourcesapi.PodResources{
		prOf("ns", "pending", []string{"GPU-0"}), prOf("ns", "started", []string{"GPU-0"}), prOf("ns", "unmanaged", []string{"GPU-0"}),
	} {
		pr[p.Name] = p
	}
	for _, enforcing := range []bool{true, false} {
		r := &Reporter{Node: "n1", Record: NewRecord(), Resources: enforce.DefaultResources, Enforcing: enforcing,
			Log: quietLog(), Metrics: NewMetrics(nil)}
		if o := r.Observe(pending, pr["pending"]); (o != nil) == enforcing {
			t.Errorf("enforcing=%v: pod without containers observed as %+v", enforcing, o)
		}
		for _, p := range []*corev1.Pod{started, unmanaged} {
			if o := r.Observe(p, pr[p.Name]); o == nil || o.Source != alloc.SourcePodResources {
				t.Errorf("enforcing=%v: %s observed as %+v, want kubelet's report", enforcing, p.Name, o)
			}
		}
	}
}

func TestDrifted(t *testing.T) {
	p := gpuPod("ns", "p", "u", 1, allocGPU1)
	same := alloc.NewObserved("n1", alloc.SourceNRI, []alloc.ContainerHolding{{Name: "main", Holding: alloc.Holding{GPUs: []string{"GPU-1"}, CPUSet: "2,3"}}})
	if Drifted(p, same) {
		t.Error("same units reported as drift")
	}
	other := alloc.NewObserved("n1", alloc.SourcePodResources, []alloc.ContainerHolding{{Name: "main", Holding: alloc.Holding{GPUs: []string{"GPU-1"}}}})
	if !Drifted(p, other) {
		t.Error("missing cpuset not reported as drift")
	}
	none := gpuPod("ns", "q", "v", 1, "")
	if Drifted(none, alloc.NewObserved("n1", alloc.SourcePodResources, nil)) {
		t.Error("empty observation without allocation reported as drift")
	}
}
