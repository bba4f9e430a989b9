package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"flextopo.dev/node/alloc"
	"flextopo.dev/node/internal/enforce"
)

// PodLister lists the pods bound to this node (the informer's cache).
type PodLister interface {
	List() []*corev1.Pod
}

// PodResourcesLister is kubelet's PodResources List.
type PodResourcesLister interface {
	List(ctx context.Context) ([]*podresourcesapi.PodResources, error)
}

// Reporter writes flextopo.io/observed on the pods of this node.
type Reporter struct {
	Node         string
	Client       kubernetes.Interface
	Pods         PodLister
	Record       *Record
	PodResources PodResourcesLister // nil: only what the NRI plugin applied
	Resources    enforce.Resources
	Log          *slog.Logger
	Metrics      *Metrics
	// Enforcing: the NRI plugin adjusts containers (enforce mode). A pod
	// with an allocation whose containers are not created yet is then not
	// reported: kubelet's PodResources already lists the device plugin's
	// choice at admission, which the plugin replaces at CreateContainer.
	Enforcing bool

	lastErr string
}

// Run reconciles every interval and whenever the record changes.
func (r *Reporter) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		r.Reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.Record.C:
		}
	}
}

// Reconcile writes the observation of every pod whose annotation differs.
func (r *Reporter) Reconcile(ctx context.Context) {
	byPod := r.podResources(ctx)
	drift := 0
	for _, pod := range r.Pods.List() {
		if pod.Spec.NodeName != r.Node || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		obs, notes := r.observe(pod, byPod[pod.Namespace+"/"+pod.Name])
		if obs == nil {
			continue
		}
		if Drifted(pod, obs) {
			drift++
		}
		r.write(ctx, pod, obs, notes)
	}
	r.Metrics.drift.Set(float64(drift))
}

func (r *Reporter) podResources(ctx context.Context) map[string]*podresourcesapi.PodResources {
	out := map[string]*podresourcesapi.PodResources{}
	if r.PodResources == nil {
		return out
	}
	list, err := r.PodResources.List(ctx)
	if err != nil {
		if msg := err.Error(); msg != r.lastErr {
			r.Log.Warn("kubelet PodResources List failed; reporting only what NRI applied", "err", err)
			r.lastErr = msg
		}
		return out
	}
	r.lastErr = ""
	for _, p := range list {
		out[p.Namespace+"/"+p.Name] = p
	}
	return out
}

// Observe builds a pod's observation: what the NRI plugin applied when it
// adjusted the pod's containers, else what kubelet reports. For a pod whose
// GPUs DRA chose, the GPUs are those of the CDI devices its containers got
// (see draView). Nil when there is nothing to say: no allocation and nothing
// held.
func (r *Reporter) Observe(pod *corev1.Pod, pr *podresourcesapi.PodResources) *alloc.Observed {
	obs, _ := r.observe(pod, pr)
	return obs
}

// observe is Observe with the differences between a DRA pod's CDI devices
// and its allocation, for the log.
func (r *Reporter) observe(pod *corev1.Pod, pr *podresourcesapi.PodResources) (*alloc.Observed, []string) {
	text, hasAlloc := pod.Annotations[alloc.AllocationAnnotation]
	dra := newDRAView(pod, text, pr)
	if applied := r.Record.Containers(string(pod.UID)); applied != nil {
		held := make(map[string]alloc.Holding, len(applied))
		for name, e := range applied {
			held[name] = dra.holding(name, e.Holding, e.CDIDevices)
		}
		return alloc.NewObserved(r.Node, alloc.SourceNRI, inSpecOrder(pod, held)), dra.notes()
	}
	if r.Enforcing && hasAlloc && !anyContainerCreated(pod) {
		return nil, nil
	}
	held := map[string]alloc.Holding{}
	for _, c := range pr.GetContainers() {
		if h := dra.holding(c.GetName(), FromPodResources(c, r.Resources), nil); !empty(h) {
			held[c.Name] = h
		}
	}
	if len(held) == 0 && (!hasAlloc || pr == nil) {
		return nil, nil
	}
	return alloc.NewObserved(r.Node, alloc.SourcePodResources, inSpecOrder(pod, held)), dra.notes()
}

// anyContainerCreated: the runtime created a container of the pod (kubelet
// reports its ID), so a container of it runs on whatever it was given.
func anyContainerCreated(pod *corev1.Pod) bool {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.ContainerID != "" {
				return true
			}
		}
	}
	return false
}

func empty(h alloc.Holding) bool {
	return len(h.GPUs) == 0 && len(h.MIG) == 0 && len(h.Replicas) == 0 && h.CPUSet == ""
}

func inSpecOrder(pod *corev1.Pod, held map[string]alloc.Holding) []alloc.ContainerHolding {
	var out []alloc.ContainerHolding
	for _, c := range Requests(pod) {
		if h, ok := held[c.Name]; ok && !empty(h) {
			out = append(out, alloc.ContainerHolding{Name: c.Name, Holding: h})
		}
	}
	return out
}

// FromPodResources reads one container's devices and exclusive CPUs from
// kubelet's report. Device IDs are the NVIDIA device plugin's: GPU UUIDs,
// MIG UUIDs, and "<uuid>::<n>" for the n-th replica of a shared GPU
// (k8s-device-plugin, internal/rm: AnnotatedID).
func FromPodResources(c *podresourcesapi.ContainerResources, res enforce.Resources) alloc.Holding {
	var h alloc.Holding
	reps := map[string]int{}
	for _, d := range c.GetDevices() {
		name := d.GetResourceName()
		if name != res.GPU && name != res.Shared && !strings.HasPrefix(name, res.MIGPrefix) {
			continue
		}
		for _, id := range d.GetDeviceIds() {
			switch base, _, replica := strings.Cut(id, "::"); {
			case replica || (name == res.Shared && res.Shared != ""):
				reps[base]++
			case strings.HasPrefix(id, "MIG-") || strings.HasPrefix(name, res.MIGPrefix):
				h.MIG = append(h.MIG, id)
			default:
				h.GPUs = append(h.GPUs, id)
			}
		}
	}
	for g, n := range reps {
		h.Replicas = append(h.Replicas, alloc.Replica{GPU: g, Count: n})
	}
	slices.SortFunc(h.Replicas, func(a, b alloc.Replica) int { return strings.Compare(a.GPU, b.GPU) })
	slices.Sort(h.GPUs)
	slices.Sort(h.MIG)
	ids := make([]int, 0, len(c.GetCpuIds()))
	for _, id := range c.GetCpuIds() {
		ids = append(ids, int(id))
	}
	h.CPUSet = alloc.FormatCPUList(ids)
	return h
}

// Drifted tells whether the observation differs from the pod's allocation
// (or holds units without one).
func Drifted(pod *corev1.Pod, obs *alloc.Observed) bool {
	text, ok := pod.Annotations[alloc.AllocationAnnotation]
	if !ok {
		return !empty(obs.Holding)
	}
	a, err := alloc.ParseAllocation(text)
	if err != nil {
		return true
	}
	want := alloc.NewObserved(obs.Node, obs.Source, []alloc.ContainerHolding{{Name: "pod", Holding: alloc.Holding{
		GPUs: a.GPUs, MIG: a.MIGUUIDs(), Replicas: a.Replicas, CPUSet: a.CPUSet}}})
	return !sameHolding(want.Holding, obs.Holding)
}

func sameHolding(a, b alloc.Holding) bool {
	return slices.Equal(a.GPUs, b.GPUs) && slices.Equal(a.MIG, b.MIG) &&
		slices.Equal(a.Replicas, b.Replicas) && a.CPUSet == b.CPUSet
}

func (r *Reporter) write(ctx context.Context, pod *corev1.Pod, obs *alloc.Observed, notes []string) {
	value := obs.Encode()
	if pod.Annotations[alloc.ObservedAnnotation] == value {
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{alloc.ObservedAnnotation: value}}})
	_, err := r.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		r.Metrics.patchErrors.Inc()
		r.Log.Warn("writing observed annotation failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return
	}
	r.Metrics.written.Inc()
	if Drifted(pod, obs) {
		r.Log.Warn("drift", "pod", pod.Namespace+"/"+pod.Name, "node", r.Node,
			"allocation", pod.Annotations[alloc.AllocationAnnotation], "observed", value, "cdi", strings.Join(notes, "; "))
	}
	r.Log.Info("observed", "pod", pod.Namespace+"/"+pod.Name, "value", value)
}
