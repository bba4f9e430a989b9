package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

// Priority classes of the preemption scenarios (cluster-scoped, created once,
// left in place: the cluster is thrown away after the run).
const (
	pcLow     = "flextopo-e2e-low"      // 100: batch work, first to go
	pcBatch   = "flextopo-e2e-batch"    // 200
	pcBatchHi = "flextopo-e2e-batch-hi" // 300
	pcMid     = "flextopo-e2e-mid"      // 500
	pcHigh    = "flextopo-e2e-high"     // 1000: the preemptors

	// The second kube-scheduler: the same configuration minus preemptVerb,
	// one profile under this name.
	schedNoPreempt = "flextopo-nopreempt"
	// A third: the same configuration with nodeCacheCapable false.
	schedNoCache = "flextopo-nocache"
)

var priorityValues = map[string]int32{pcLow: 100, pcBatch: 200, pcBatchHi: 300, pcMid: 500, pcHigh: 1000}

var (
	priorityOnce sync.Once
	priorityErr  error
)

func ensurePriorityClasses(t *testing.T, c *harness.Cluster) {
	t.Helper()
	priorityOnce.Do(func() {
		cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		priorityErr = harness.CreatePriorityClasses(cx, c.Client, priorityValues, nil,
			"flextopo e2e preemption scenarios")
	})
	if priorityErr != nil {
		t.Fatal(priorityErr)
	}
}

// requireNoPreemptScheduler starts (once per run) a second kube-scheduler
// whose only profile is schedNoPreempt and whose extender entry is the run's
// scheduler configuration with preemptVerb removed: pods naming that
// scheduler get kube-scheduler's own victims, still filtered, scored and
// bound by the same flextopo extender.
//
// Why a second process rather than restarting the one scheduler: extenders
// are configured per process, not per profile, so the two behaviours cannot
// share a process; a second process lets both run in one cluster at the same
// time against one extender, on disjoint labelled nodes, and leaves the
// scheduler every other test uses untouched.
func requireNoPreemptScheduler(t *testing.T, c *harness.Cluster) {
	t.Helper()
	requireExtraScheduler(t, c, schedNoPreempt, func(ext0 map[string]interface{}) {
		delete(ext0, "preemptVerb")
	})
}

// requireNoCacheScheduler starts (once per run) a kube-scheduler whose only
// profile is schedNoCache and whose extender entry has nodeCacheCapable
// false: full Node and victim Pod objects on the wire.
func requireNoCacheScheduler(t *testing.T, c *harness.Cluster) {
	t.Helper()
	requireExtraScheduler(t, c, schedNoCache, func(ext0 map[string]interface{}) {
		ext0["nodeCacheCapable"] = false
	})
}

var (
	extraSchedMu   sync.Mutex
	extraSchedErrs = map[string]*extraSchedState{}
)

type extraSchedState struct {
	once sync.Once
	err  error
}

// requireExtraScheduler starts, once per run and schedulerName, a
// kube-scheduler process with that single profile and the run's extender
// entry changed by edit.
func requireExtraScheduler(t *testing.T, c *harness.Cluster, schedulerName string, edit func(ext0 map[string]interface{})) {
	t.Helper()
	extraSchedMu.Lock()
	st := extraSchedErrs[schedulerName]
	if st == nil {
		st = &extraSchedState{}
		extraSchedErrs[schedulerName] = st
	}
	extraSchedMu.Unlock()
	st.once.Do(func() {
		_, st.err = c.StartExtraScheduler("kube-scheduler-"+strings.TrimPrefix(schedulerName, "flextopo-"), schedulerName,
			func(cfg map[string]interface{}) error {
				exts, _ := cfg["extenders"].([]interface{})
				ext0, _ := exts[0].(map[string]interface{})
				edit(ext0)
				return nil
			})
	})
	if st.err != nil {
		t.Fatalf("extra kube-scheduler (%s): %v", schedulerName, st.err)
	}
}

// requirePreemptVerb fails the test when the run's scheduler configuration
// does not register the extender's preempt verb.
func requirePreemptVerb(t *testing.T, c *harness.Cluster) {
	t.Helper()
	cfg, err := c.SchedulerConfigMap(c.ExtPort)
	if err != nil {
		t.Fatal(err)
	}
	exts, _ := cfg["extenders"].([]interface{})
	ext0, _ := exts[0].(map[string]interface{})
	if v, _ := ext0["preemptVerb"].(string); v == "" {
		t.Fatalf("%s: extenders[0] has no preemptVerb; the preemption scenarios need it", c.SchedulerConfigSource())
	}
}

// heldPod is a lower-priority pod created already bound to a node, with the
// allocation annotation flextopo would have written: the test decides
// exactly which GPUs, MIG instances and CPUs it holds.
type heldPod struct {
	name     string
	class    string // PriorityClass
	gpus     []int  // GPU indexes
	cpus     string // pinned cpuset; the pod requests that many CPUs, Guaranteed
	mig      []flextopo.MIGInstance
	labels   map[string]string
	startAgo time.Duration // status.startTime = now - startAgo
}

func (h heldPod) cpuCount() int {
	set, err := flextopo.ParseCPUList(h.cpus)
	if err != nil {
		panic(err)
	}
	return len(set)
}

// allocationFor is the flextopo.io/allocation annotation of a held pod.
func allocationFor(node string, t *flextopo.Topology, h heldPod, memMiB int64) string {
	a := map[string]interface{}{
		"version": 1, "node": node, "level": "node", "mode": "best-effort",
		"gpus": []string{}, "gpuIndexes": []int{}, "mig": []flextopo.MIGAllocation{},
		"cpuset": h.cpus, "numaNodes": []int{}, "memoryMiB": 0,
	}
	var gpus []string
	for _, g := range h.gpus {
		gpus = append(gpus, flextopo.GPUUUID(node, g))
	}
	if gpus != nil {
		a["gpus"], a["gpuIndexes"] = gpus, h.gpus
	}
	var migs []flextopo.MIGAllocation
	for _, m := range h.mig {
		gu, inst, ok := t.MIGInstanceOf(m.UUID)
		if !ok {
			panic("unknown MIG instance " + m.UUID)
		}
		migs = append(migs, flextopo.MIGAllocation{UUID: inst.UUID, Profile: inst.Profile, GPU: gu, Start: inst.Start, Size: inst.Size})
	}
	if migs != nil {
		a["mig"] = migs
	}
	if h.cpus != "" {
		cpus, _ := flextopo.ParseCPUList(h.cpus)
		var numas []int
		for _, id := range t.NUMAIDs() {
			in := t.NUMACPUs(id)
			for c := range cpus {
				if in[c] {
					numas = append(numas, id)
					break
				}
			}
		}
		a["numaNodes"] = numas
		a["memoryMiB"] = memMiB
		if len(numas) == 1 {
			a["level"], a["mode"] = "numa", "guaranteed"
		}
	}
	out, err := json.Marshal(a)
	if err != nil {
		panic(err)
	}
	return string(out)
}

// createHeldPods creates the pods bound to node and marks them Running since
// their start time, as a kubelet would.
func (s *scenario) createHeldPods(node string, schedulerName string, pods []heldPod) {
	s.t.Helper()
	topo := s.topos[node]
	if topo == nil {
		s.t.Fatalf("createHeldPods: no topology recorded for node %s", node)
	}
	for _, h := range pods {
		ps := podSpec{
			name: h.name, memory: "256Mi", priorityClass: h.class, schedulerName: schedulerName,
			labels: h.labels, nodeName: node, allocation: allocationFor(node, topo, h, 256),
			gpus: len(h.gpus), cpu: "100m",
		}
		if n := h.cpuCount(); n > 0 {
			ps.cpu, ps.guaranteed = strconv.Itoa(n), true
		}
		if len(h.mig) > 0 {
			ps.extended = corev1.ResourceList{}
			for _, m := range h.mig {
				_, inst, _ := topo.MIGInstanceOf(m.UUID)
				name := corev1.ResourceName("nvidia.com/mig-" + inst.Profile)
				q := ps.extended[name]
				q.Add(resource.MustParse("1"))
				ps.extended[name] = q
			}
		}
		pod := s.createPod(ps)
		started := metav1.NewTime(time.Now().Add(-h.startAgo).Truncate(time.Second))
		pod.Status.Phase = corev1.PodRunning
		pod.Status.StartTime = &started
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started,
		})
		cx := harness.Ctx(s.t, 30*time.Second)
		if _, err := s.c.Client.CoreV1().Pods(s.ns).UpdateStatus(cx, pod, metav1.UpdateOptions{}); err != nil {
			s.t.Fatalf("mark pod %s Running: %v", h.name, err)
		}
	}
	s.waitSchedulerSaw(schedulerName)
}

// waitSchedulerSaw waits until scheduler schedulerName has tried a canary
// pod created after everything before this call: its pod informer delivers
// events in order, so by then its cache holds the held pods with their
// start times, on which its victim order depends. A scheduler started
// moments ago (the second and third kube-scheduler) may not have them yet
// when the preemptor comes, and would then find no victim and leave the
// preemptor waiting for an event that does not come. The canary selects no
// node and has priority 0, so it can neither bind nor preempt; it is
// deleted at once.
func (s *scenario) waitSchedulerSaw(schedulerName string) {
	s.t.Helper()
	name := "canary"
	s.createPod(podSpec{name: name, cpu: "10m", memory: "16Mi", schedulerName: schedulerName,
		nodeSelector: map[string]string{labelTest: s.id + "-nowhere"}})
	deadline := time.Now().Add(podTimeout)
	for {
		c := harness.PodCondition(s.getPod(name), corev1.PodScheduled)
		if c != nil && c.Status == corev1.ConditionFalse {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("scheduler %s did not try pod %s/%s within %s", schedulerName, s.ns, name, podTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	zero := int64(0)
	cx := harness.Ctx(s.t, 30*time.Second)
	if err := s.c.Client.CoreV1().Pods(s.ns).Delete(cx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		s.t.Fatalf("delete pod %s/%s: %v", s.ns, name, err)
	}
}

// extenderFilter asks the extender's /filter directly for a probe pod.
func (s *scenario) extenderFilter(probe podSpec, nodes []string) (passed []string, failed map[string]string, err error) {
	q := func(v string) resource.Quantity { return resource.MustParse(v) }
	req := corev1.ResourceList{corev1.ResourceCPU: q(probe.cpu), corev1.ResourceMemory: q(probe.memory)}
	if probe.gpus > 0 {
		req[flextopo.ResGPU] = *resource.NewQuantity(int64(probe.gpus), resource.DecimalSI)
	}
	for k, v := range probe.extended {
		req[k] = v
	}
	lim := corev1.ResourceList{}
	for k, v := range req {
		if probe.guaranteed || (k != corev1.ResourceCPU && k != corev1.ResourceMemory) {
			lim[k] = v
		}
	}
	ann := map[string]string{}
	for k, v := range probe.annotations {
		ann[k] = v
	}
	if probe.affinity != "" {
		ann[flextopo.AnnAffinity] = probe.affinity
	}
	if probe.mode != "" {
		ann[flextopo.AnnAffinityMode] = probe.mode
	}
	pod := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "flextopo-e2e-probe", Namespace: s.ns, UID: types.UID(uuid.NewUUID()),
			Annotations: ann},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: harness.PauseImage,
			Resources: corev1.ResourceRequirements{Requests: req, Limits: lim},
		}}},
	}
	body, err := json.Marshal(map[string]interface{}{"Pod": pod, "Nodes": nil, "NodeNames": nodes})
	if err != nil {
		return nil, nil, err
	}
	resp, err := harness.HTTPClient(nil).Post(s.c.ExtenderURL+"/filter", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var res struct {
		NodeNames                  []string
		FailedNodes                map[string]string
		FailedAndUnresolvableNodes map[string]string
		Error                      string
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, nil, fmt.Errorf("HTTP %d: %v", resp.StatusCode, err)
	}
	if res.Error != "" {
		return nil, nil, fmt.Errorf("extender error: %s", res.Error)
	}
	failed = map[string]string{}
	for k, v := range res.FailedNodes {
		failed[k] = v
	}
	for k, v := range res.FailedAndUnresolvableNodes {
		failed[k] = v
	}
	return res.NodeNames, failed, nil
}

// waitExtenderRejects waits until the extender's filter rejects node for the
// probe pod: its watch has then delivered the held pods. Fails the test after
// 15 s.
func (s *scenario) waitExtenderRejects(node string, probe podSpec) string {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		_, failed, err := s.extenderFilter(probe, []string{node})
		if err == nil {
			if why, ok := failed[node]; ok {
				return why
			}
			last = "node accepted"
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("extender never rejected node %s for a probe %+v within 15s (last: %s): it has not seen the held pods", node, probe, last)
	return ""
}

// podRecorder watches a namespace and notes when pods are deleted, marked
// for deletion, marked DisruptionTarget, or bound.
type podRecorder struct {
	mu          sync.Mutex
	deleted     map[string]time.Time
	terminating map[string]time.Time
	disrupted   map[string]string // name -> reason: message
	bound       map[string]time.Time
	node        map[string]string
	last        time.Time // last deletion-related event
	cancel      context.CancelFunc
	done        chan struct{}
	err         error
}

func (s *scenario) recordPods() *podRecorder {
	s.t.Helper()
	cx, cancel := context.WithCancel(context.Background())
	r := &podRecorder{
		deleted: map[string]time.Time{}, terminating: map[string]time.Time{}, disrupted: map[string]string{},
		bound: map[string]time.Time{}, node: map[string]string{}, cancel: cancel, done: make(chan struct{}),
	}
	lcx, lcancel := context.WithTimeout(cx, 30*time.Second)
	list, err := s.c.Client.CoreV1().Pods(s.ns).List(lcx, metav1.ListOptions{})
	lcancel()
	if err != nil {
		cancel()
		s.t.Fatalf("list pods in %s: %v", s.ns, err)
	}
	for i := range list.Items {
		r.observe(watch.Added, &list.Items[i])
	}
	rv := list.ResourceVersion
	go func() {
		defer close(r.done)
		for cx.Err() == nil {
			w, err := s.c.Client.CoreV1().Pods(s.ns).Watch(cx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				if cx.Err() == nil {
					r.setErr(err)
					time.Sleep(200 * time.Millisecond)
				}
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					r.setErr(fmt.Errorf("watch error: %v", ev.Object))
					break
				}
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = pod.ResourceVersion
				if ev.Type != watch.Bookmark {
					r.observe(ev.Type, pod)
				}
			}
			w.Stop()
		}
	}()
	s.t.Cleanup(r.stop)
	return r
}

func (r *podRecorder) setErr(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

func (r *podRecorder) stop() {
	r.cancel()
	<-r.done
}

func (r *podRecorder) observe(t watch.EventType, p *corev1.Pod) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	name := p.Name
	if t == watch.Deleted {
		if _, seen := r.deleted[name]; !seen {
			r.deleted[name] = now
			r.last = now
		}
		return
	}
	if p.DeletionTimestamp != nil {
		if _, seen := r.terminating[name]; !seen {
			r.terminating[name] = now
			r.last = now
		}
	}
	if c := harness.PodCondition(p, corev1.DisruptionTarget); c != nil && c.Status == corev1.ConditionTrue {
		if _, seen := r.disrupted[name]; !seen {
			r.disrupted[name] = c.Reason + ": " + c.Message
			r.last = now
		}
	}
	if p.Spec.NodeName != "" {
		if _, seen := r.bound[name]; !seen {
			r.bound[name] = now
			r.node[name] = p.Spec.NodeName
		}
	}
}

// victims returns the pods among candidates that were deleted, marked for
// deletion or marked DisruptionTarget, sorted.
func (r *podRecorder) victims(candidates []heldPod) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, h := range candidates {
		_, d := r.deleted[h.name]
		_, term := r.terminating[h.name]
		_, dis := r.disrupted[h.name]
		if d || term || dis {
			out = append(out, h.name)
		}
	}
	sort.Strings(out)
	return out
}

func (r *podRecorder) lastEviction() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func (r *podRecorder) boundAt(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.bound[name]
	return at, ok
}

// describeVictim says how a victim went: DisruptionTarget, a graceful phase
// (deletionTimestamp seen before the object vanished) and the deletion.
func (r *podRecorder) describeVictim(name string, t0 time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	if why, ok := r.disrupted[name]; ok {
		parts = append(parts, "DisruptionTarget("+why+")")
	}
	if at, ok := r.terminating[name]; ok {
		parts = append(parts, fmt.Sprintf("deletionTimestamp seen at +%s", at.Sub(t0).Round(time.Millisecond)))
	}
	if at, ok := r.deleted[name]; ok {
		parts = append(parts, fmt.Sprintf("gone at +%s", at.Sub(t0).Round(time.Millisecond)))
	} else {
		parts = append(parts, "still present")
	}
	return strings.Join(parts, ", ")
}

// reapTerminating force-deletes victims that are marked for deletion but
// still present after grace: the stand-in for the kubelet this cluster does
// not have. It returns the names it had to delete.
func (s *scenario) reapTerminating(r *podRecorder, grace time.Duration) []string {
	r.mu.Lock()
	var stuck []string
	for name, at := range r.terminating {
		if _, gone := r.deleted[name]; !gone && time.Since(at) >= grace {
			stuck = append(stuck, name)
		}
	}
	r.mu.Unlock()
	zero := int64(0)
	for _, name := range stuck {
		cx := harness.Ctx(s.t, 10*time.Second)
		err := s.c.Client.CoreV1().Pods(s.ns).Delete(cx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			s.t.Errorf("force-delete terminating pod %s: %v", name, err)
		}
	}
	sort.Strings(stuck)
	return stuck
}

// preemptionOutcome is what happened to one preemptor.
type preemptionOutcome struct {
	variant   string
	bound     bool
	node      string
	alloc     *flextopo.Allocation
	bindAfter time.Duration
	victims   []string
	aligned   string // "yes (NUMA 1)" / "no"
	condition string // PodScheduled message while pending
	reaped    []string
	decisions []string // the extender's preempt log lines for the node
}

func (o *preemptionOutcome) level() string {
	if !o.bound {
		return "pending"
	}
	if o.alloc == nil {
		return "bound, no allocation"
	}
	return o.alloc.Level
}

func (o *preemptionOutcome) placement() string {
	if !o.bound || o.alloc == nil {
		return "-"
	}
	var parts []string
	if len(o.alloc.NUMANodes) > 0 {
		parts = append(parts, fmt.Sprintf("NUMA %v", o.alloc.NUMANodes))
	}
	if len(o.alloc.GPUIndexes) > 0 {
		parts = append(parts, fmt.Sprintf("GPU %v", o.alloc.GPUIndexes))
	}
	if len(o.alloc.MIG) > 0 {
		var ids []string
		for _, m := range o.alloc.MIG {
			ids = append(ids, m.Profile+" "+m.UUID)
		}
		parts = append(parts, "MIG "+strings.Join(ids, ","))
	}
	if o.alloc.CPUSet != "" {
		parts = append(parts, "cpus "+o.alloc.CPUSet)
	}
	return strings.Join(parts, ", ")
}

func (o *preemptionOutcome) bindTime() string {
	if !o.bound {
		return "never (watched " + o.bindAfter.Round(100*time.Millisecond).String() + ")"
	}
	return o.bindAfter.Round(10 * time.Millisecond).String()
}

// waitPreemption waits for the preemptor created at t0 to be bound with an
// allocation, or to stay pending: it is called pending once at least
// minPending has passed since t0 and nothing was evicted for settle.
func (s *scenario) waitPreemption(r *podRecorder, name string, t0 time.Time, minPending, settle time.Duration) (*corev1.Pod, bool) {
	s.t.Helper()
	deadline := t0.Add(podTimeout)
	for {
		if err := s.c.Extender.CheckAlive(); err != nil {
			s.t.Fatal(err)
		}
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(cx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			s.t.Fatalf("get pod %s/%s: %v", s.ns, name, err)
		}
		if pod.Spec.NodeName != "" && pod.Annotations[flextopo.AnnAllocation] != "" {
			return pod, true
		}
		now := time.Now()
		quiet := r.lastEviction()
		if quiet.Before(t0) {
			quiet = t0
		}
		if pod.Spec.NodeName == "" && now.Sub(t0) >= minPending && now.Sub(quiet) >= settle {
			return pod, false
		}
		if now.After(deadline) {
			return pod, pod.Spec.NodeName != ""
		}
		s.reapTerminating(r, 3*time.Second)
		time.Sleep(200 * time.Millisecond)
	}
}

// runPreemption creates the preemptor, waits for the outcome and collects
// it. held are the pods that may become victims.
func (s *scenario) runPreemption(variant, node string, held []heldPod, preemptor podSpec, minPending, settle time.Duration) *preemptionOutcome {
	s.t.Helper()
	r := s.recordPods()
	t0 := time.Now()
	s.createPod(preemptor)
	pod, bound := s.waitPreemption(r, preemptor.name, t0, minPending, settle)
	o := &preemptionOutcome{variant: variant, bound: bound, node: pod.Spec.NodeName}
	if bound {
		at, ok := r.boundAt(preemptor.name)
		if !ok {
			at = time.Now()
		}
		o.bindAfter = at.Sub(t0)
		if raw := pod.Annotations[flextopo.AnnAllocation]; raw != "" {
			var a flextopo.Allocation
			if err := json.Unmarshal([]byte(raw), &a); err != nil {
				s.t.Errorf("pod %s: allocation is not JSON: %v: %s", preemptor.name, err, raw)
			} else {
				o.alloc = &a
			}
			s.t.Logf("[%s] pod %s -> node %s, allocation %s", variant, preemptor.name, pod.Spec.NodeName, raw)
		}
	} else {
		o.bindAfter = time.Since(t0)
		if c := harness.PodCondition(pod, corev1.PodScheduled); c != nil {
			o.condition = c.Message
		}
		s.t.Logf("[%s] pod %s still pending after %s: %s", variant, preemptor.name,
			o.bindAfter.Round(100*time.Millisecond), podConditionText(pod))
	}
	// Victims still terminating now get the kubelet stand-in.
	time.Sleep(300 * time.Millisecond)
	o.reaped = s.reapTerminating(r, 0)
	o.victims = r.victims(held)
	for _, v := range o.victims {
		s.t.Logf("[%s] victim %s: %s", variant, v, r.describeVictim(v, t0))
	}
	if len(o.reaped) > 0 {
		s.t.Logf("[%s] victims left terminating by the scheduler's delete and force-deleted by the test: %v", variant, o.reaped)
	}
	o.decisions = extenderPreemptLog(s.c, node)
	for _, d := range o.decisions {
		s.t.Logf("[%s] extender: %s", variant, d)
	}
	return o
}

// extenderPreemptLog returns the extender's log lines of the preempt verb
// about node (or, when node ends in "-", about every node named with that
// prefix), as "level pod node: msg (reason)".
func extenderPreemptLog(c *harness.Cluster, node string) []string {
	var out []string
	if c.Extender == nil {
		return nil
	}
	f, err := os.Open(c.Extender.LogPath)
	if err != nil {
		return []string{"(cannot read extender log: " + err.Error() + ")"}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var l struct{ Level, Msg, Verb, Pod, Node, Reason string }
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Verb != "preempt" {
			continue
		}
		if l.Node != node && !(strings.HasSuffix(node, "-") && strings.HasPrefix(l.Node, node)) {
			continue
		}
		out = append(out, fmt.Sprintf("%s pod=%s node=%s: %s (%s)", l.Level, l.Pod, l.Node, l.Msg, l.Reason))
	}
	return out
}

// logMatches counts the lines of a process log that match re.
func logMatches(p *harness.Process, re *regexp.Regexp) int {
	if p == nil {
		return 0
	}
	f, err := os.Open(p.LogPath)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if re.Match(sc.Bytes()) {
			n++
		}
	}
	return n
}

// freeAfter says, per NUMA node of topo, how many GPUs and CPUs are free
// once the pods in gone have left (held pods only: nothing else is there).
func freeAfter(topo *flextopo.Topology, held []heldPod, gone map[string]bool) (gpus map[int]int, cpus map[int]int) {
	usedGPU := map[int]bool{}
	usedCPU := map[int]bool{}
	for _, h := range held {
		if gone[h.name] {
			continue
		}
		for _, g := range h.gpus {
			usedGPU[g] = true
		}
		set, _ := flextopo.ParseCPUList(h.cpus)
		for c := range set {
			usedCPU[c] = true
		}
	}
	gpus, cpus = map[int]int{}, map[int]int{}
	flextopo.ForEachGPU(topo, func(numa int, g *flextopo.GPU) {
		if !usedGPU[g.Index] {
			gpus[numa]++
		}
	})
	for _, id := range topo.NUMAIDs() {
		for c := range topo.NUMACPUs(id) {
			if !usedCPU[c] {
				cpus[id]++
			}
		}
	}
	return gpus, cpus
}

// alignedNUMAs lists the NUMA nodes with at least wantGPUs free GPUs and
// wantCPUs free CPUs once gone have left.
func alignedNUMAs(topo *flextopo.Topology, held []heldPod, gone map[string]bool, wantGPUs, wantCPUs int) []int {
	gpus, cpus := freeAfter(topo, held, gone)
	var out []int
	for _, id := range topo.NUMAIDs() {
		if gpus[id] >= wantGPUs && cpus[id] >= wantCPUs {
			out = append(out, id)
		}
	}
	return out
}

func setOf(names []string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkFreedAligned fills o.aligned: did the victims free a NUMA node with
// the preemptor's GPUs and CPUs that was not free before?
func checkFreedAligned(o *preemptionOutcome, topo *flextopo.Topology, held []heldPod, wantGPUs, wantCPUs int) []int {
	before := alignedNUMAs(topo, held, nil, wantGPUs, wantCPUs)
	after := alignedNUMAs(topo, held, setOf(o.victims), wantGPUs, wantCPUs)
	if len(after) > len(before) {
		o.aligned = fmt.Sprintf("yes (NUMA %v)", after)
	} else {
		o.aligned = "no"
	}
	return after
}

// checkPlacementFree checks that the preemptor's GPUs and CPUs are neither
// held by a surviving pod nor outside the node.
func checkPlacementFree(t *testing.T, o *preemptionOutcome, topo *flextopo.Topology, held []heldPod) {
	t.Helper()
	if o.alloc == nil {
		return
	}
	gone := setOf(o.victims)
	owner := map[string]string{}
	for _, h := range held {
		if gone[h.name] {
			continue
		}
		for _, g := range h.gpus {
			owner[fmt.Sprintf("gpu%d", g)] = h.name
		}
		set, _ := flextopo.ParseCPUList(h.cpus)
		for c := range set {
			owner[fmt.Sprintf("cpu%d", c)] = h.name
		}
	}
	for _, u := range o.alloc.GPUs {
		idx := topo.GPUIndexOf(u)
		if idx < 0 {
			t.Errorf("[%s] allocation GPU %s is not on the node", o.variant, u)
		} else if who := owner[fmt.Sprintf("gpu%d", idx)]; who != "" {
			t.Errorf("[%s] allocation GPU %d is still held by surviving pod %s", o.variant, idx, who)
		}
	}
	cpus, _ := flextopo.ParseCPUList(o.alloc.CPUSet)
	for c := range cpus {
		if who := owner[fmt.Sprintf("cpu%d", c)]; who != "" {
			t.Errorf("[%s] allocation CPU %d is still pinned by surviving pod %s", o.variant, c, who)
		}
	}
}

// comparisonTable formats outcomes side by side.
func comparisonTable(title string, outs ...*preemptionOutcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", title)
	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\tvictims evicted\tcount\tfreed NUMA-aligned set\tpreemptor level\tplacement\tcreation -> bind")
	for _, o := range outs {
		v := strings.Join(o.victims, ",")
		if v == "" {
			v = "(none)"
		}
		lvl := o.level()
		if !o.bound && o.aligned == "no" && len(o.victims) > 0 {
			lvl = "pending (not aligned)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", o.variant, v, len(o.victims), o.aligned, lvl, o.placement(), o.bindTime())
	}
	tw.Flush()
	return b.String()
}

var (
	reportMu    sync.Mutex
	reportFresh = true
)

// writeReport appends text to $FLEXTOPO_E2E_REPORT (truncated at the first
// write of the run); a relative path is taken from the repository root.
func writeReport(t *testing.T, c *harness.Cluster, text string) {
	t.Helper()
	path := os.Getenv("FLEXTOPO_E2E_REPORT")
	if path == "" {
		return
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.RepoRoot, path)
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if reportFresh {
		flags = os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Errorf("report: %v", err)
		return
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		t.Errorf("report: %v", err)
		return
	}
	defer f.Close()
	if reportFresh {
		fmt.Fprintf(f, "flextopo e2e preemption report (%s)\n\n", time.Now().UTC().Format(time.RFC3339))
		reportFresh = false
	}
	fmt.Fprintf(f, "%s\n", text)
	t.Logf("table written to %s", path)
}

// newPDB creates a PodDisruptionBudget with maxUnavailable 0 over labels and
// writes the status the disruption controller (absent here) would: no
// disruption allowed.
func (s *scenario) newPDB(name string, labels map[string]string, pods int32) {
	s.t.Helper()
	cx := harness.Ctx(s.t, 30*time.Second)
	zero := intstr.FromInt32(0)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &zero,
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
		},
	}
	created, err := s.c.Client.PolicyV1().PodDisruptionBudgets(s.ns).Create(cx, pdb, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("create PodDisruptionBudget %s: %v", name, err)
	}
	created.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: created.Generation,
		DisruptionsAllowed: 0,
		CurrentHealthy:     pods,
		DesiredHealthy:     pods,
		ExpectedPods:       pods,
		Conditions: []metav1.Condition{{
			Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
			Reason: policyv1.InsufficientPodsReason, Message: "set by the flextopo e2e test (no disruption controller runs)",
			LastTransitionTime: metav1.Now(), ObservedGeneration: created.Generation,
		}},
	}
	if _, err := s.c.Client.PolicyV1().PodDisruptionBudgets(s.ns).UpdateStatus(cx, created, metav1.UpdateOptions{}); err != nil {
		s.t.Fatalf("update status of PodDisruptionBudget %s: %v", name, err)
	}
}

// serverMinor returns the minor version of the API server (the same build
// as kube-scheduler in this harness).
func serverMinor(t *testing.T, c *harness.Cluster) (string, int) {
	t.Helper()
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	m := regexp.MustCompile(`^v1\.(\d+)\.`).FindStringSubmatch(v.GitVersion)
	if m == nil {
		t.Fatalf("server version %q: cannot parse", v.GitVersion)
	}
	minor, _ := strconv.Atoi(m[1])
	return v.GitVersion, minor
}
