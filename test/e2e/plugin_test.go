package e2e

// flextopo-scheduler (scheduler/: kube-scheduler with flextopo's framework
// plugins over the same C core) against the extender, on one workload: two
// copies of the same A100 nodes, one scheduled by the run's kube-scheduler
// with the extender, one by a flextopo-scheduler started for the test
// (schedulerName flextopo-plugin, configs/scheduler-plugin-config.yaml).
// The same pods go to each, one at a time; each must land on the node of
// the same name with the same allocation, or stay Pending in both
// (DESIGN.md, "One core, two front ends": a differential test proves it).
// Then the plugin's debug API and metrics are read from the scheduler
// process, and a preemption runs through kube-scheduler's evaluator with
// flextopo's victims.
//
// FLEXTOPO_SCHEDULER names the binary (default build/flextopo-scheduler;
// scripts/build-scheduler.sh builds it). Without it a local run skips and
// CI fails.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const pluginSchedulerName = "flextopo-plugin"

// pluginSchedulerBinary is the flextopo-scheduler binary; without it the
// test skips (fails in CI).
func pluginSchedulerBinary(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	bin := harness.SchedulerBinary(c.RepoRoot)
	if !harness.IsExecutable(bin) {
		msg := fmt.Sprintf("flextopo-scheduler %s not found (scripts/build-scheduler.sh builds it; FLEXTOPO_SCHEDULER names another)", bin)
		if harness.IsCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// requirePluginScheduler starts a flextopo-scheduler for the test, or
// skips (fails in CI) without the binary.
func requirePluginScheduler(t *testing.T, c *harness.Cluster) *harness.PluginScheduler {
	t.Helper()
	bin := pluginSchedulerBinary(t, c)
	// Without the fragmentation penalty, as the run's extender scores
	// (harness.Cluster.startExtender says why).
	return c.StartPluginScheduler(t, "flextopo-scheduler", bin, pluginSchedulerName,
		map[string]interface{}{"fragmentationWindow": 0}, nil)
}

// pluginNodes are three A100 boxes of different shapes, so that flextopo's
// ranks never tie between them (kube-scheduler picks at random among equal
// totals, and the two front ends would then differ by chance).
func pluginNodes(s *scenario) []string {
	// 8 SXM GPUs on NVSwitch, 2 NUMA nodes of 64 CPUs.
	nvswitch := s.addTopologyNode("nvswitch", perfNodeTopo(s.nodeName("nvswitch")))

	// 8 PCIe GPUs with NVLink bridges in pairs, 2 NUMA nodes of 32 CPUs.
	b := newTopo(s.nodeName("pairs")).gpuModel(a100Model, a100MemMiB)
	so := b.socket()
	g := append(b.switchGPUs(b.numa(so, "0-31", 262144), 4), b.switchGPUs(b.numa(so, "32-63", 262144), 4)...)
	for i := 0; i < len(g); i += 2 {
		b.nvlink(g[i], g[i+1], 4)
	}
	pairs := s.addTopologyNode("pairs", b.build())

	// 4 PCIe GPUs, 2 NUMA nodes of 8 CPUs, the only pair across them.
	sb := newTopo(s.nodeName("small")).gpuModel(a100Model, a100MemMiB)
	so = sb.socket()
	n0 := sb.switchGPUs(sb.numa(so, "0-7", 65536), 2)
	n1 := sb.switchGPUs(sb.numa(so, "8-15", 65536), 2)
	sb.nvlink(n0[1], n1[0], 4)
	small := s.addTopologyNode("small", sb.build())
	return []string{nvswitch, pairs, small}
}

// settled waits until the pod is bound with an allocation (returned) or
// kube-scheduler marks it Unschedulable (nil and the message).
func (s *scenario) settled(name string) (*corev1.Pod, *flextopo.Allocation, string) {
	s.t.Helper()
	deadline := time.Now().Add(podTimeout)
	for {
		pod := s.getPod(name)
		if pod.Spec.NodeName != "" {
			_, a := s.waitScheduled(name)
			return pod, a, ""
		}
		if cond := harness.PodCondition(pod, corev1.PodScheduled); cond != nil &&
			cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			return nil, nil, cond.Message
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("pod %s/%s neither bound nor Unschedulable after %s; %s", s.ns, name, podTimeout, podConditionText(pod))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// short is a node's name without its scenario's prefix.
func (s *scenario) short(node string) string { return strings.TrimPrefix(node, s.id+"-") }

// placement is what must agree between the front ends.
type placement struct {
	Node, Level, Mode, CPUSet string
	GPUIndexes, NUMANodes     []int
	MemoryMiB                 int64
}

func placementOf(s *scenario, pod *corev1.Pod, a *flextopo.Allocation) *placement {
	if pod == nil {
		return nil
	}
	return &placement{Node: s.short(pod.Spec.NodeName), Level: a.Level, Mode: a.Mode, CPUSet: a.CPUSet,
		GPUIndexes: a.GPUIndexes, NUMANodes: a.NUMANodes, MemoryMiB: a.MemoryMiB}
}

func TestPluginPlacesAsExtender(t *testing.T) {
	c := requireExtender(t)
	ps := requirePluginScheduler(t, c)
	ext := newScenario(t, c, "pd-ext")
	plg := newScenario(t, c, "pd-plg")
	ext.waitExtenderSees(pluginNodes(ext)...)
	// Both sides start from the same nodes: the plugin's model (fed by
	// kube-scheduler's own informers) must have them before the first pod.
	for _, n := range pluginNodes(plg) {
		waitPluginHolds(t, ps, n, 0)
	}

	// refusedBy: the pods only flextopo refuses (the in-tree filters
	// pass), whose Unschedulable message must name the plugin.
	type pluginPod struct {
		podSpec
		only      string // short name of the one node it may use
		refusedBy bool
	}
	pods := []pluginPod{
		{podSpec: podSpec{name: "numa-2", gpus: 2, cpu: "8", memory: "16Gi", guaranteed: true, affinity: "numa", mode: "guaranteed"}},
		// small's GPUs 2 and 3 are free, but its only NVLink pair is (1, 2).
		{podSpec: podSpec{name: "nvlink-small", gpus: 2, cpu: "1", memory: "1Gi", affinity: "nvlink", mode: "guaranteed"},
			only: "small", refusedBy: true},
		{podSpec: podSpec{name: "nvlink-2", gpus: 2, cpu: "1", memory: "1Gi", affinity: "nvlink", mode: "guaranteed"}},
		{podSpec: podSpec{name: "nvlink-4", gpus: 4, cpu: "4", memory: "8Gi", guaranteed: true, affinity: "nvlink", mode: "guaranteed"}},
		{podSpec: podSpec{name: "numa-4", gpus: 4, cpu: "16", memory: "32Gi", guaranteed: true, affinity: "numa", mode: "guaranteed"}},
		{podSpec: podSpec{name: "any-1", gpus: 1, cpu: "1", memory: "1Gi"}},
		{podSpec: podSpec{name: "nvlink-2-be", gpus: 2, cpu: "2", memory: "2Gi", affinity: "nvlink", mode: "best-effort"}},
		{podSpec: podSpec{name: "pcie-2", gpus: 2, cpu: "2", memory: "2Gi", affinity: "pcie-switch", mode: "guaranteed"}},
		{podSpec: podSpec{name: "numa-2-b", gpus: 2, cpu: "8", memory: "16Gi", guaranteed: true, affinity: "numa", mode: "guaranteed"}},
		{podSpec: podSpec{name: "nvlink-8", gpus: 8, cpu: "8", memory: "8Gi", affinity: "nvlink", mode: "guaranteed"}},
	}
	bound := 0
	for _, pp := range pods {
		spec := pp.podSpec
		if pp.only != "" {
			spec.nodeSelector = map[string]string{"kubernetes.io/hostname": ext.nodeName(pp.only)}
		}
		ext.createPod(spec)
		extPod, extAlloc, extMsg := ext.settled(spec.name)
		spec.schedulerName = pluginSchedulerName
		if pp.only != "" {
			spec.nodeSelector = map[string]string{"kubernetes.io/hostname": plg.nodeName(pp.only)}
		}
		plg.createPod(spec)
		plgPod, plgAlloc, plgMsg := plg.settled(spec.name)

		want, got := placementOf(ext, extPod, extAlloc), placementOf(plg, plgPod, plgAlloc)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("pod %s: extender %+v (%s), plugin %+v (%s)", spec.name, want, extMsg, got, plgMsg)
			continue
		}
		if got == nil {
			t.Logf("pod %s: Pending in both (extender: %s; plugin: %s)", spec.name, extMsg, plgMsg)
			if pp.refusedBy && !strings.Contains(plgMsg, "nvlink") {
				t.Errorf("pod %s: the plugin's Unschedulable message lacks flextopo's reason: %s", spec.name, plgMsg)
			}
			continue
		}
		bound++
		t.Logf("pod %s: %+v in both", spec.name, *got)
	}
	if bound < 5 {
		t.Errorf("only %d of %d pods were placed; the workload no longer tests placement", bound, len(pods))
	}
	checkPluginDebug(t, ps, plg)
}

// TestPluginRanksCPUOnlyPods: a pod that asks flextopo for nothing (no
// GPU, no pinned CPUs, no affinity) skips the plugin's Filter but is still
// ranked, as the extender ranks every pod sent to it: its CPUs should go
// where they strand no GPU, and a node flextopo does not model strands
// none. Two nodes of equal CPU and memory, one an 8-GPU box with all its
// GPUs free and one without GPUs or topology; every other score of the
// profile ties between them, so without flextopo's rank each pod would go
// to either at random.
func TestPluginRanksCPUOnlyPods(t *testing.T) {
	c := requireExtender(t)
	ps := requirePluginScheduler(t, c)
	s := newScenario(t, c, "pd-cpu")
	gpu := s.addTopologyNode("gpu", perfNodeTopo(s.nodeName("gpu")))
	plain := s.addNode("plain", "", 128, 1<<20, 0, nil)
	for _, n := range []string{gpu, plain} {
		waitPluginHolds(t, ps, n, 0)
	}
	const pods = 5
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("cpu-%d", i)
		s.createPod(podSpec{name: name, cpu: "2", memory: "2Gi", schedulerName: pluginSchedulerName})
		pod := s.waitBound(name, false)
		if pod.Spec.NodeName != plain {
			t.Errorf("pod %s on %s; want %s, where its CPUs strand no GPU", name, pod.Spec.NodeName, plain)
		}
		if a := pod.Annotations[flextopo.AnnAllocation]; a != "" {
			t.Errorf("pod %s: an allocation for a pod that asks for no device: %s", name, a)
		}
	}
	// Ranked (prioritize) and bound through the plugin, never filtered.
	// Bind logs its decision once the Binding's reply is back, which can
	// be a moment after the pod shows its node.
	verbs := pluginVerbs(t, ps, s.ns)
	for deadline := time.Now().Add(10 * time.Second); verbs["bind"] < pods && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		verbs = pluginVerbs(t, ps, s.ns)
	}
	if verbs["prioritize"] != pods || verbs["bind"] != pods || verbs["filter"] != 0 {
		t.Errorf("plugin decisions for %d CPU-only pods: %v; want %d prioritize, %d bind, no filter", pods, verbs, pods, pods)
	}
	waitPluginHolds(t, ps, plain, pods)
}

// checkPluginDebug reads the decisions and metrics the plugin served from
// the scheduler process, on the extender's paths and schemas.
func checkPluginDebug(t *testing.T, ps *harness.PluginScheduler, s *scenario) {
	t.Helper()
	verbs := pluginVerbs(t, ps, s.ns)
	for _, verb := range []string{"filter", "prioritize", "bind"} {
		if verbs[verb] == 0 {
			t.Errorf("plugin /debug/decisions: no %s decision for a pod of %s (have %v)", verb, s.ns, verbs)
		}
	}
	metrics := mustGet(t, ps.DebugURL+"/metrics")
	for _, want := range []string{`flextopo_requests_total{verb="bind"}`, "flextopo_ready 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("plugin /metrics lacks %q", want)
		}
	}
}

// pluginVerbs counts the decisions the plugin logged for pods of
// namespace ns, by verb.
func pluginVerbs(t *testing.T, ps *harness.PluginScheduler, ns string) map[string]int {
	t.Helper()
	var decisions struct {
		Decisions []struct {
			Verb string `json:"verb"`
			Pod  struct {
				Namespace string `json:"namespace"`
			} `json:"pod"`
		} `json:"decisions"`
	}
	body := mustGet(t, ps.DebugURL+"/debug/decisions?limit=200")
	if err := json.Unmarshal([]byte(body), &decisions); err != nil {
		t.Fatalf("/debug/decisions: %v: %s", err, body)
	}
	verbs := map[string]int{}
	for _, d := range decisions.Decisions {
		if d.Pod.Namespace == ns {
			verbs[d.Verb]++
		}
	}
	return verbs
}

func mustGet(t *testing.T, url string) string {
	t.Helper()
	code, body := httpGet(url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d: %s", url, code, body)
	}
	return body
}

// TestPluginPreemptionPaperScenario: the paper's preemption scenario
// (preempt_test.go, paperHeld) through flextopo-scheduler's PostFilter:
// kube-scheduler's evaluator, flextopo's victims. The victims must be the
// extender mode's ({gpu-b, cpu-c}: the cheapest set that frees a GPU with
// six CPUs beside it), and the preemptor must bind aligned.
func TestPluginPreemptionPaperScenario(t *testing.T) {
	ps, s, o, topo, held := runPluginPreemption(t, "paper-plg", "Paper scenario", paperHeld(), nil)
	checkPaperOutcome(t, o, topo, held)
	if body := mustGet(t, ps.DebugURL+"/debug/pods/"+s.ns+"/llm"); !strings.Contains(body, `"preempt"`) {
		t.Errorf("plugin /debug/pods/%s/llm shows no preempt decision: %s", s.ns, body)
	}
}

// runPluginPreemption runs a preemption scenario of preempt_test.go on an
// 8x RTX 4090 node through flextopo-scheduler's PostFilter: `held` bound
// there, then the guaranteed llm preemptor; setup (or nil) runs on the
// scenario before the node is made. The freed set must leave an aligned
// GPU with six CPUs.
func runPluginPreemption(t *testing.T, prefix, title string, held []heldPod, setup func(*scenario)) (*harness.PluginScheduler, *scenario, *preemptionOutcome, *flextopo.Topology, []heldPod) {
	t.Helper()
	c := requireExtender(t)
	ps := requirePluginScheduler(t, c)
	ensurePriorityClasses(t, c)
	s := newScenario(t, c, prefix)
	if setup != nil {
		setup(s)
	}
	topo := rtx4090Node(s.nodeName("rtx"))
	node := s.addTopologyNode("rtx", topo)
	s.createHeldPods(node, pluginSchedulerName, held)
	waitPluginHolds(t, ps, node, len(held))

	preemptor := llmPreemptor("guaranteed")
	preemptor.schedulerName = pluginSchedulerName
	o := s.runPreemption("flextopo-scheduler PostFilter", node, held, preemptor, preemptMinPending, preemptSettle)
	checkFreedAligned(o, topo, held, 1, 6)
	t.Log("\n" + comparisonTable(title+", flextopo-scheduler (framework plugins):", o))
	return ps, s, o, topo, held
}

// waitPluginHolds waits until the plugin's model holds `pods` pods on node
// (its /debug/nodes), so that the scenario starts from what was created.
func waitPluginHolds(t *testing.T, ps *harness.PluginScheduler, node string, pods int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var rows struct {
			Nodes []struct {
				Name string `json:"name"`
				Pods int    `json:"pods"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(mustGet(t, ps.DebugURL+"/debug/nodes")), &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows.Nodes {
			if r.Name == node && r.Pods == pods {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin model: node %s does not hold %d pods after 30s: %+v", node, pods, rows.Nodes)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestPluginPreemptionAvoidsPDBProtectedPod: the PDB scenario
// (TestPreemptionAvoidsPDBProtectedPod) through flextopo-scheduler's
// PostFilter. The victims must be the extender mode's: {twin}, never the
// pod its PodDisruptionBudget protects.
func TestPluginPreemptionAvoidsPDBProtectedPod(t *testing.T) {
	_, _, o, topo, held := runPluginPreemption(t, "pdb-plg", "PDB scenario", pdbHeld(), func(s *scenario) {
		s.newPDB("guarded", map[string]string{"app": "guarded"}, 1)
	})
	checkPDBOutcome(t, o, topo, held)
}
