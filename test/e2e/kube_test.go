package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const (
	// labelTest marks the nodes of one test; its pods select them, so tests
	// never see each other's nodes.
	labelTest = "e2e.flextopo.io/test"

	podTimeout     = 60 * time.Second
	pendingObserve = 8 * time.Second
)

// scenario is one test's namespace, nodes and pods.
type scenario struct {
	t     *testing.T
	c     *harness.Cluster
	id    string // short, DNS-safe
	ns    string
	nodes []string
	topos map[string]*flextopo.Topology
}

// newScenario creates namespace e2e-<id> and removes the test's pods and
// nodes when the test ends.
func newScenario(t *testing.T, c *harness.Cluster, id string) *scenario {
	t.Helper()
	s := &scenario{t: t, c: c, id: id, ns: "e2e-" + id, topos: map[string]*flextopo.Topology{}}
	cx := harness.Ctx(t, 30*time.Second)
	_, err := c.Client.CoreV1().Namespaces().Create(cx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: s.ns},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", s.ns, err)
	}
	t.Cleanup(s.cleanup)
	return s
}

func (s *scenario) cleanup() {
	cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.t.Failed() {
		s.describe(cx)
	}
	zero := int64(0)
	err := s.c.Client.CoreV1().Pods(s.ns).DeleteCollection(cx,
		metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	if err != nil {
		s.t.Logf("cleanup: delete pods in %s: %v", s.ns, err)
	}
	for _, n := range s.nodes {
		if err := s.c.Client.CoreV1().Nodes().Delete(cx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.t.Logf("cleanup: delete node %s: %v", n, err)
		}
	}
}

// describe logs the state of the test's pods and nodes after a failure.
func (s *scenario) describe(cx context.Context) {
	pods, err := s.c.Client.CoreV1().Pods(s.ns).List(cx, metav1.ListOptions{})
	if err != nil {
		s.t.Logf("list pods: %v", err)
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		s.t.Logf("pod %s: node=%q phase=%s allocation=%s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Annotations[flextopo.AnnAllocation])
		for _, cond := range p.Status.Conditions {
			s.t.Logf("  condition %s=%s reason=%s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	s.t.Logf("events in %s:\n%s", s.ns, s.events(cx, ""))
	for _, n := range s.nodes {
		s.t.Logf("node %s topology: %s", n, s.rawTopology(n))
	}
}

func (s *scenario) rawTopology(node string) string {
	if t := s.topos[node]; t != nil {
		return t.JSON()
	}
	return "(not valid JSON / not set)"
}

// events lists the events of the namespace (optionally of one pod) as text.
func (s *scenario) events(cx context.Context, pod string) string {
	opts := metav1.ListOptions{}
	if pod != "" {
		opts.FieldSelector = "involvedObject.name=" + pod
	}
	evs, err := s.c.Client.CoreV1().Events(s.ns).List(cx, opts)
	if err != nil {
		return fmt.Sprintf("(list events: %v)", err)
	}
	var b strings.Builder
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "  %s %s/%s %s: %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	// kube-scheduler records through events.k8s.io/v1; core/v1 shows them as well.
	return b.String()
}

// nodeName qualifies a node name with the scenario id.
func (s *scenario) nodeName(short string) string { return s.id + "-" + short }

// addNode creates a node with the given topology annotation (raw text, so a
// test can pass invalid JSON) and capacity, then marks it Ready through the
// status subresource. No kubelet ever reports for it.
func (s *scenario) addNode(short, topologyAnnotation string, cpus int, memMiB int64, gpus int, extra corev1.ResourceList) string {
	s.t.Helper()
	return s.addLabelledNode(short, topologyAnnotation, cpus, memMiB, gpus, extra, nil)
}

// addLabelledNode is addNode with more labels besides the test's own.
func (s *scenario) addLabelledNode(short, topologyAnnotation string, cpus int, memMiB int64, gpus int, extra corev1.ResourceList,
	labels map[string]string) string {
	s.t.Helper()
	name := s.nodeName(short)
	cx := harness.Ctx(s.t, 30*time.Second)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				labelTest:                s.id,
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
			},
			Annotations: map[string]string{},
		},
	}
	for k, v := range labels {
		node.Labels[k] = v
	}
	if topologyAnnotation != "" {
		node.Annotations[flextopo.AnnTopology] = topologyAnnotation
	}
	created, err := s.c.Client.CoreV1().Nodes().Create(cx, node, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("create node %s: %v", name, err)
	}
	s.nodes = append(s.nodes, name)

	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memMiB*1024*1024, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	if gpus > 0 {
		capacity[flextopo.ResGPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	for k, v := range extra {
		capacity[k] = v
	}
	now := metav1.Now()
	created.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "fake node of the flextopo e2e test", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
		NodeInfo:  corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "v1.36.3"},
	}
	if _, err := s.c.Client.CoreV1().Nodes().UpdateStatus(cx, created, metav1.UpdateOptions{}); err != nil {
		s.t.Fatalf("update status of node %s: %v", name, err)
	}
	return name
}

// setUnschedulable cordons (true) or uncordons a node of the test, as
// kubectl cordon does: kube-scheduler's NodeUnschedulable filter reads
// spec.unschedulable.
func (s *scenario) setUnschedulable(name string, cordoned bool) {
	s.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, cordoned)
	cx := harness.Ctx(s.t, 30*time.Second)
	if _, err := s.c.Client.CoreV1().Nodes().Patch(cx, name, types.StrategicMergePatchType, []byte(patch),
		metav1.PatchOptions{}); err != nil {
		s.t.Fatalf("set unschedulable %t on node %s: %v", cordoned, name, err)
	}
}

// addTopologyNode creates a node whose capacity matches its topology, GPU
// resources as the NVIDIA device plugin would advertise them.
func (s *scenario) addTopologyNode(short string, t *flextopo.Topology) string {
	s.t.Helper()
	return s.addLabelledTopologyNode(short, t, nil)
}

// addLabelledTopologyNode is addTopologyNode with more labels besides the
// test's own.
func (s *scenario) addLabelledTopologyNode(short string, t *flextopo.Topology, labels map[string]string) string {
	s.t.Helper()
	name := s.addLabelledNode(short, t.JSON(), t.CPUCount(), t.MemoryMiB(), 0, t.DeviceCapacity(), labels)
	s.topos[name] = t
	return name
}

// podSpec describes a test pod: one container, requests == limits when
// guaranteed, otherwise requests only (cpu, memory) plus the GPU limit.
type podSpec struct {
	name       string
	gpus       int
	cpu        string // "8", "100m"
	memory     string // "1Gi"
	guaranteed bool
	affinity   string // flextopo.io/affinity, "" = none
	mode       string // flextopo.io/affinity-mode, "" = none

	// Optional; the zero values keep the behaviour above.
	priorityClass string              // spec.priorityClassName
	schedulerName string              // spec.schedulerName ("" = default-scheduler)
	labels        map[string]string   // metadata.labels
	annotations   map[string]string   // more metadata.annotations
	extended      corev1.ResourceList // more resources, as requests and limits (e.g. MIG)
	nodeSelector  map[string]string   // replaces the selector of the test's nodes
	// nodeName creates the pod already bound to that node (no scheduler
	// involved); allocation, when set, is written as its flextopo.io/allocation
	// annotation, as if flextopo had bound it.
	nodeName   string
	allocation string
}

func (s *scenario) createPod(ps podSpec) *corev1.Pod {
	s.t.Helper()
	cx := harness.Ctx(s.t, 30*time.Second)
	created, err := s.c.Client.CoreV1().Pods(s.ns).Create(cx, s.podObject(ps), metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("create pod %s/%s: %v", s.ns, ps.name, err)
	}
	if ps.guaranteed && created.Status.QOSClass != "" && created.Status.QOSClass != corev1.PodQOSGuaranteed {
		s.t.Fatalf("pod %s: QoS class %s, want Guaranteed", ps.name, created.Status.QOSClass)
	}
	return created
}

// podObject is the pod createPod creates for ps.
func (s *scenario) podObject(ps podSpec) *corev1.Pod {
	req := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(ps.cpu),
		corev1.ResourceMemory: resource.MustParse(ps.memory),
	}
	lim := corev1.ResourceList{}
	if ps.guaranteed {
		lim = req.DeepCopy()
	}
	if ps.gpus > 0 {
		q := *resource.NewQuantity(int64(ps.gpus), resource.DecimalSI)
		req[flextopo.ResGPU] = q
		lim[flextopo.ResGPU] = q
	}
	for k, v := range ps.extended {
		req[k] = v.DeepCopy()
		lim[k] = v.DeepCopy()
	}
	ann := map[string]string{}
	for k, v := range ps.annotations {
		ann[k] = v
	}
	if ps.allocation != "" {
		ann[flextopo.AnnAllocation] = ps.allocation
	}
	if ps.affinity != "" {
		ann[flextopo.AnnAffinity] = ps.affinity
	}
	if ps.mode != "" {
		ann[flextopo.AnnAffinityMode] = ps.mode
	}
	selector := ps.nodeSelector
	if selector == nil {
		selector = map[string]string{labelTest: s.id}
	}
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: ps.name, Namespace: s.ns, Annotations: ann, Labels: ps.labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  selector,
			NodeName:                      ps.nodeName,
			SchedulerName:                 ps.schedulerName,
			PriorityClassName:             ps.priorityClass,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     harness.PauseImage,
				Resources: corev1.ResourceRequirements{Requests: req, Limits: lim},
			}},
		},
	}
}

// getPod reads a pod of the test from the API server; the test fails when
// it cannot.
func (s *scenario) getPod(name string) *corev1.Pod {
	s.t.Helper()
	cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(cx, name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatalf("get pod %s/%s: %v", s.ns, name, err)
	}
	return pod
}

// waitBound waits until the pod has a node (and, with needAllocation, an
// allocation annotation).
func (s *scenario) waitBound(name string, needAllocation bool) *corev1.Pod {
	s.t.Helper()
	deadline := time.Now().Add(podTimeout)
	for {
		if s.c.Extender != nil {
			if err := s.c.Extender.CheckAlive(); err != nil {
				s.t.Fatal(err)
			}
		}
		pod := s.getPod(name)
		if pod.Spec.NodeName != "" && (!needAllocation || pod.Annotations[flextopo.AnnAllocation] != "") {
			return pod
		}
		if time.Now().After(deadline) {
			what := "not scheduled"
			if pod.Spec.NodeName != "" {
				what = fmt.Sprintf("bound to %s but has no %s annotation", pod.Spec.NodeName, flextopo.AnnAllocation)
			}
			s.t.Fatalf("pod %s/%s %s after %s; %s", s.ns, name, what, podTimeout, podConditionText(pod))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitScheduled waits until the pod has a node and an allocation annotation,
// checks the annotation's envelope and returns both.
func (s *scenario) waitScheduled(name string) (*corev1.Pod, *flextopo.Allocation) {
	s.t.Helper()
	pod := s.waitBound(name, true)
	raw := pod.Annotations[flextopo.AnnAllocation]
	var a flextopo.Allocation
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		s.t.Fatalf("pod %s: %s is not valid JSON: %v: %s", name, flextopo.AnnAllocation, err, raw)
	}
	s.t.Logf("pod %s -> node %s, allocation %s", name, pod.Spec.NodeName, raw)
	if a.Version != 1 {
		s.t.Errorf("pod %s: allocation version %d, want 1", name, a.Version)
	}
	if a.Node != pod.Spec.NodeName {
		s.t.Errorf("pod %s: allocation names node %q but the pod is bound to %q", name, a.Node, pod.Spec.NodeName)
	}
	return pod, &a
}

// waitUnschedulable waits until the scheduler marks the pod Unschedulable,
// then checks for a while that it stays unbound. Returns the condition
// message.
func (s *scenario) waitUnschedulable(name string) string {
	s.t.Helper()
	deadline := time.Now().Add(podTimeout)
	var msg string
	for {
		pod := s.getPod(name)
		if pod.Spec.NodeName != "" {
			s.t.Fatalf("pod %s/%s was bound to %s, want it Pending; allocation %s",
				s.ns, name, pod.Spec.NodeName, pod.Annotations[flextopo.AnnAllocation])
		}
		if cond := harness.PodCondition(pod, corev1.PodScheduled); msg == "" && cond != nil &&
			cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			msg = cond.Message
			// Keep watching: it must stay unbound.
			deadline = time.Now().Add(pendingObserve)
		}
		if time.Now().After(deadline) {
			if msg == "" {
				s.t.Fatalf("pod %s/%s: no Unschedulable condition after %s; %s", s.ns, name, podTimeout, podConditionText(pod))
			}
			return msg
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func podConditionText(p *corev1.Pod) string {
	if c := harness.PodCondition(p, corev1.PodScheduled); c != nil {
		return fmt.Sprintf("PodScheduled=%s reason=%s message=%q", c.Status, c.Reason, c.Message)
	}
	return "no PodScheduled condition yet"
}

// waitExtenderSees asks the extender's /filter directly, with a plain pod
// that needs nothing, until it accepts every given node: then its watch has
// delivered them and the scheduler's first attempt will not race the
// extender's cache. It gives up quietly after a while (the scheduler retries
// anyway); it only makes the common path deterministic.
func (s *scenario) waitExtenderSees(nodes ...string) {
	s.t.Helper()
	if s.c.Extender == nil {
		return
	}
	probe := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "flextopo-e2e-probe", Namespace: s.ns, UID: types.UID(uuid.NewUUID())},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: harness.PauseImage,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"),
			}},
		}}},
	}
	body, err := json.Marshal(map[string]interface{}{"Pod": probe, "Nodes": nil, "NodeNames": nodes})
	if err != nil {
		s.t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		resp, err := client.Post(s.c.ExtenderURL+"/filter", "application/json", bytes.NewReader(body))
		if err == nil {
			out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			last = fmt.Sprintf("HTTP %d %s", resp.StatusCode, strings.TrimSpace(string(out)))
			var res struct {
				NodeNames []string
				Error     string
			}
			if resp.StatusCode == 200 && json.Unmarshal(out, &res) == nil && res.Error == "" && sameSet(res.NodeNames, nodes) {
				return
			}
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Logf("note: extender /filter did not accept all of %v for a plain pod within 15s (last: %s); continuing", nodes, last)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x := append([]string(nil), a...)
	y := append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}
