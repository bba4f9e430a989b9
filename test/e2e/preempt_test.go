package e2e

// Topology-aware preemption against a real kube-scheduler.
//
// The lower-priority pods are created already bound to their node, with the
// allocation annotation flextopo would have written: the scenarios need an
// exact layout of GPUs and pinned CPUs, which scheduling them one by one
// through the extender would not give. The extender learns them from its
// watch like any other bound pod; kube-scheduler sees them as assigned pods.
// Their terminationGracePeriodSeconds is 0, so the scheduler's preemption
// (a DisruptionTarget status patch, then a DELETE with default options,
// i.e. the pod's own grace period) removes them at once; a victim left
// terminating would be force-deleted by the test in the kubelet's stead and
// reported.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const (
	// A preemptor that ends up pending is watched this long after its
	// creation, and until nothing was evicted for preemptSettle.
	preemptMinPending = 12 * time.Second
	preemptSettle     = 8 * time.Second
)

// rtx4090Node is the 8x RTX 4090 box of api/examples/rtx4090-8x.json: two
// sockets, four NUMA nodes each, 8 CPUs and one GPU (behind its own PCIe
// switch) per NUMA node. GPU k and CPUs 8k..8k+7 share NUMA node k.
func rtx4090Node(node string) *flextopo.Topology {
	b := newTopo(node)
	for s := 0; s < 2; s++ {
		so := b.socket()
		for i := 0; i < 4; i++ {
			k := s*4 + i
			b.switchGPUs(b.numa(so, fmt.Sprintf("%d-%d", 8*k, 8*k+7), 65536), 1)
		}
	}
	return b.build()
}

func cpuRange(lo, hi int) string { return fmt.Sprintf("%d-%d", lo, hi) }

// paperHeld is the paper's situation on one 8x RTX 4090 node: every GPU is
// taken by lower-priority batch pods and their pinned CPUs are scattered, so
// that the pod kube-scheduler would evict (the lowest-priority GPU holder)
// frees a GPU whose NUMA node has no free CPUs left:
//
//	NUMA 0: gpu-a  (low 100, GPU 0, CPU 0)   + mid-cpu (mid 500, CPUs 1-7)
//	NUMA 1: gpu-b  (batch 200, GPU 1, 8-11)  + cpu-c   (low 100, CPUs 12-15)
//	NUMA k: gpu-k  (batch-hi 300, GPU k, 4 CPUs; 4 CPUs free), k = 2..7
//
// A 1-GPU + 6-CPU numa-guaranteed pod (high 1000) fits nowhere. Aligned
// victim sets: {gpu-a, mid-cpu} (top priority 500), {gpu-b, cpu-c} (200),
// {gpu-k} (300): the cheapest in kube-scheduler's order is {gpu-b, cpu-c},
// which it never proposes; it proposes {gpu-a}, which frees GPU 0 with one
// CPU beside it. 40 of 64 CPUs are requested, so CPUs never limit the count.
func paperHeld() []heldPod {
	hold := []heldPod{
		{name: "gpu-a", class: pcLow, gpus: []int{0}, cpus: "0", startAgo: 5 * time.Hour},
		{name: "mid-cpu", class: pcMid, cpus: "1-7", startAgo: 5 * time.Hour},
		{name: "gpu-b", class: pcBatch, gpus: []int{1}, cpus: "8-11", startAgo: 4 * time.Hour},
		{name: "cpu-c", class: pcLow, cpus: "12-15", startAgo: 4 * time.Hour},
	}
	for k := 2; k < 8; k++ {
		hold = append(hold, heldPod{name: fmt.Sprintf("gpu-%d", k), class: pcBatchHi, gpus: []int{k},
			cpus: cpuRange(8*k, 8*k+3), startAgo: time.Duration(10-k) * time.Hour})
	}
	return hold
}

// bestEffortHeld is paperHeld with every other NUMA node's spare CPUs also
// taken, so that every NUMA-aligned set needs two victims while one victim
// (gpu-a, the count-based choice) is enough for a placement at some level:
//
//	NUMA 0: gpu-a (low, GPU 0, CPU 0) + mid-cpu (mid, 1-7)
//	NUMA 1: gpu-b (batch, GPU 1, 8-11) + cpu-c (low, 12-15)
//	NUMA k: gpu-k (batch-hi, GPU k, 2 CPUs) + cpu-k (batch-hi, 4 CPUs), 2 free, k = 2..7
//
// 52 of 64 CPUs are requested; with the preemptor's 6, 58.
func bestEffortHeld() []heldPod {
	hold := []heldPod{
		{name: "gpu-a", class: pcLow, gpus: []int{0}, cpus: "0", startAgo: 5 * time.Hour},
		{name: "mid-cpu", class: pcMid, cpus: "1-7", startAgo: 5 * time.Hour},
		{name: "gpu-b", class: pcBatch, gpus: []int{1}, cpus: "8-11", startAgo: 4 * time.Hour},
		{name: "cpu-c", class: pcLow, cpus: "12-15", startAgo: 4 * time.Hour},
	}
	for k := 2; k < 8; k++ {
		ago := time.Duration(10-k) * time.Hour
		hold = append(hold,
			heldPod{name: fmt.Sprintf("cpu-%d", k), class: pcBatchHi, cpus: cpuRange(8*k+2, 8*k+5), startAgo: ago},
			heldPod{name: fmt.Sprintf("gpu-%d", k), class: pcBatchHi, gpus: []int{k}, cpus: cpuRange(8*k, 8*k+1), startAgo: ago})
	}
	return hold
}

// preemptionVariant is one side of a comparison: which scheduler profile.
type preemptionVariant struct {
	label         string // table row
	id            string // scenario id (namespace, node names)
	schedulerName string // "" = the main scheduler, with the preempt verb
}

var (
	withPreemptVerb = preemptionVariant{label: "flextopo preempt verb", schedulerName: ""}
	withoutVerb     = preemptionVariant{label: "kube-scheduler victims (no preempt verb)", schedulerName: schedNoPreempt}
)

// runOn8x4090 builds one 8x RTX 4090 node with the held pods, waits until the
// extender has them, and runs the preemptor.
func runOn8x4090(t *testing.T, c *harness.Cluster, v preemptionVariant, held []heldPod, preemptor podSpec) (*preemptionOutcome, *flextopo.Topology) {
	t.Helper()
	s := newScenario(t, c, v.id)
	topo := rtx4090Node(s.nodeName("rtx"))
	node := s.addTopologyNode("rtx", topo)
	s.waitExtenderSees(node)
	s.createHeldPods(node, v.schedulerName, held)
	// Every GPU is held: a 1-GPU probe is refused once the extender knows.
	// The last held pod holds a GPU, so by then it has seen them all.
	why := s.waitExtenderRejects(node, podSpec{cpu: "100m", memory: "64Mi", gpus: 1, affinity: "node", mode: "best-effort"})
	t.Logf("[%s] extender has the held pods (probe refused: %s)", v.label, why)
	preemptor.schedulerName = v.schedulerName
	o := s.runPreemption(v.label, node, held, preemptor, preemptMinPending, preemptSettle)
	return o, topo
}

// compareOn8x4090 runs `preemptor` against `held` on an RTX 4090 node with
// flextopo's preempt verb (variant "<prefix>-ft") and without it
// ("<prefix>-def"), in parallel, logs and reports the two outcomes side by
// side under `title`, and returns them (with flextopo's first) with the
// topology of each variant's node. It skips without the preempt verb or the
// second kube-scheduler.
func compareOn8x4090(t *testing.T, c *harness.Cluster, prefix string, held []heldPod, preemptor podSpec, title string) (o, d *preemptionOutcome, oTopo, dTopo *flextopo.Topology) {
	requirePreemptVerb(t, c)
	ensurePriorityClasses(t, c)
	requireNoPreemptScheduler(t, c)
	outs := map[string]*preemptionOutcome{}
	topos := map[string]*flextopo.Topology{}
	var mu sync.Mutex
	ft, def := withPreemptVerb, withoutVerb
	ft.id, def.id = prefix+"-ft", prefix+"-def"
	t.Run("variants", func(t *testing.T) {
		for _, v := range []preemptionVariant{ft, def} {
			v := v
			t.Run(v.id, func(t *testing.T) {
				t.Parallel()
				o, topo := runOn8x4090(t, c, v, held, preemptor)
				checkFreedAligned(o, topo, held, 1, 6)
				mu.Lock()
				outs[v.id], topos[v.id] = o, topo
				mu.Unlock()
			})
		}
	})
	o, d = outs[ft.id], outs[def.id]
	if o == nil || d == nil {
		t.Fatal("a variant did not finish")
	}
	table := comparisonTable(title, o, d)
	t.Log("\n" + table)
	writeReport(t, c, table)
	return o, d, topos[ft.id], topos[def.id]
}

func llmPreemptor(mode string) podSpec {
	return podSpec{name: "llm", gpus: 1, cpu: "6", memory: "2Gi", guaranteed: true,
		affinity: "numa", mode: mode, priorityClass: pcHigh}
}

// TestPreemptionPaperScenario (end to end): the paper's scenario
// with flextopo's preempt verb and, on a second kube-scheduler, without it;
// both outcomes are printed side by side.
func TestPreemptionPaperScenario(t *testing.T) {
	c := requireExtender(t)
	t.Parallel()
	held := paperHeld()
	o, d, oTopo, _ := compareOn8x4090(t, c, "paper", held, llmPreemptor("guaranteed"),
		"Paper scenario, 8x RTX 4090, preemptor 1 GPU + 6 pinned CPUs, numa/guaranteed, priority 1000:")

	// With the preempt verb: an aligned set was freed and used.
	if !o.bound {
		t.Errorf("with the preempt verb the preemptor did not bind: %s", o.condition)
	} else {
		checkNUMAAllocation(t, "llm", o.alloc, oTopo, 6, 1)
		checkPlacementFree(t, o, oTopo, held)
	}
	if o.aligned == "no" {
		t.Errorf("with the preempt verb the victims %v freed no NUMA node with 1 GPU and 6 CPUs", o.victims)
	}
	if want := []string{"cpu-c", "gpu-b"}; !sameSet(o.victims, want) {
		t.Errorf("with the preempt verb the victims are %v, want %v (the cheapest aligned set in kube-scheduler's order: top priority 200)", o.victims, want)
	}
	if o.alloc != nil && len(o.alloc.NUMANodes) == 1 && o.alloc.NUMANodes[0] != 1 {
		t.Errorf("with the preempt verb the preemptor landed on NUMA node %v, want 1 (freed by gpu-b and cpu-c)", o.alloc.NUMANodes)
	}

	// Without it: kube-scheduler's own count-based choice, to show the
	// contrast; if this changes, the scenario no longer shows it.
	if want := []string{"gpu-a"}; !sameSet(d.victims, want) {
		t.Errorf("without the preempt verb kube-scheduler evicted %v; the scenario expects %v (its lowest-priority GPU holder)", d.victims, want)
	}
	if d.bound && d.alloc != nil && d.alloc.Level == "numa" {
		t.Errorf("without the preempt verb the preemptor reached numa; the scenario is meant to show it cannot")
	}
}

// TestPreemptionBestEffortNeverEvictsMore: a best-effort preemptor
// on a node where every aligned set costs two victims and one victim is
// enough by count; flextopo must not evict more pods than kube-scheduler.
func TestPreemptionBestEffortNeverEvictsMore(t *testing.T) {
	c := requireExtender(t)
	t.Parallel()
	held := bestEffortHeld()
	o, d, oTopo, dTopo := compareOn8x4090(t, c, "be", held, llmPreemptor("best-effort"),
		"Best-effort, 8x RTX 4090, preemptor 1 GPU + 6 pinned CPUs, numa/best-effort, priority 1000:")

	if len(o.victims) > len(d.victims) {
		t.Errorf("best-effort: flextopo evicted %d pods %v, kube-scheduler alone %d %v: it must never evict more",
			len(o.victims), o.victims, len(d.victims), d.victims)
	}
	if len(o.victims) == 0 {
		t.Errorf("best-effort: flextopo evicted nothing")
	}
	for _, run := range []struct {
		ov   *preemptionOutcome
		topo *flextopo.Topology
	}{{o, oTopo}, {d, dTopo}} {
		ov := run.ov
		if !ov.bound {
			t.Errorf("[%s] best-effort preemptor did not bind: %s", ov.variant, ov.condition)
			continue
		}
		if ov.alloc != nil && ov.alloc.Mode != "best-effort" {
			t.Errorf("[%s] allocation mode %q, want best-effort", ov.variant, ov.alloc.Mode)
		}
		checkPlacementFree(t, ov, run.topo, held)
	}
	if o.bound && d.bound && o.alloc != nil && d.alloc != nil && levelRank(o.alloc.Level) > levelRank(d.alloc.Level) {
		t.Errorf("best-effort: flextopo reached %s, looser than kube-scheduler's %s at no fewer evictions", o.alloc.Level, d.alloc.Level)
	}
}

func levelRank(l string) int {
	for i, n := range []string{"nvlink", "pcie-switch", "numa", "socket", "node"} {
		if n == l {
			return i
		}
	}
	return 99
}

// TestPreemptionAvoidsPDBProtectedPod: two aligned victim sets of
// equal cost, one holding a pod a PodDisruptionBudget protects
// (maxUnavailable 0). The protected pod started later, so without PDB
// accounting the start-time tie-break would pick it.
//
//	NUMA 0: guarded (batch 200, GPU 0, CPUs 0-3, PDB) ; 4-7 free
//	NUMA 1: twin    (batch 200, GPU 1, CPUs 8-11)     ; 12-15 free
//	NUMA k: hold-k  (mid 500, GPU k, 4 CPUs), k = 2..7
func TestPreemptionAvoidsPDBProtectedPod(t *testing.T) {
	c := requireExtender(t)
	t.Parallel()
	requirePreemptVerb(t, c)
	ensurePriorityClasses(t, c)

	held := pdbHeld()
	s := newScenario(t, c, "pdb")
	s.newPDB("guarded", map[string]string{"app": "guarded"}, 1)
	topo := rtx4090Node(s.nodeName("rtx"))
	node := s.addTopologyNode("rtx", topo)
	s.waitExtenderSees(node)
	s.createHeldPods(node, "", held)
	s.waitExtenderRejects(node, podSpec{cpu: "100m", memory: "64Mi", gpus: 1, affinity: "node", mode: "best-effort"})

	o := s.runPreemption("flextopo preempt verb", node, held, llmPreemptor("guaranteed"), preemptMinPending, preemptSettle)
	checkFreedAligned(o, topo, held, 1, 6)
	table := comparisonTable("PDB scenario, 8x RTX 4090: {guarded} (PDB maxUnavailable 0) vs {twin}, equal cost otherwise:", o)
	t.Log("\n" + table)
	writeReport(t, c, table)
	checkPDBOutcome(t, o, topo, held)
}

// pdbHeld: the PDB scenario's lower-priority pods (see
// TestPreemptionAvoidsPDBProtectedPod).
func pdbHeld() []heldPod {
	held := []heldPod{
		{name: "guarded", class: pcBatch, gpus: []int{0}, cpus: "0-3", labels: map[string]string{"app": "guarded"}, startAgo: 1 * time.Hour},
		{name: "twin", class: pcBatch, gpus: []int{1}, cpus: "8-11", labels: map[string]string{"app": "twin"}, startAgo: 2 * time.Hour},
	}
	for k := 2; k < 8; k++ {
		held = append(held, heldPod{name: fmt.Sprintf("hold-%d", k), class: pcMid, gpus: []int{k}, cpus: cpuRange(8*k, 8*k+3), startAgo: 3 * time.Hour})
	}
	return held
}

// checkPDBOutcome: {twin} evicted, never the PDB-protected pod, and the
// preemptor bound NUMA-aligned on what was freed.
func checkPDBOutcome(t *testing.T, o *preemptionOutcome, topo *flextopo.Topology, held []heldPod) {
	t.Helper()
	if setOf(o.victims)["guarded"] {
		t.Errorf("the PDB-protected pod guarded was evicted (victims %v) although {twin} is an aligned set of equal cost with no PDB violation", o.victims)
	}
	if want := []string{"twin"}; !sameSet(o.victims, want) {
		t.Errorf("victims %v, want %v", o.victims, want)
	}
	if !o.bound {
		t.Fatalf("the preemptor did not bind: %s", o.condition)
	}
	checkNUMAAllocation(t, "llm", o.alloc, topo, 6, 1)
	checkPlacementFree(t, o, topo, held)
}

// TestPreemptionMIGProfile: a pod asking nvidia.com/mig-3g.40gb
// evicts the low-priority holder of a 3g.40gb instance, not the
// lower-priority pods on 1g.10gb instances, nor the higher-priority 3g.40gb
// holder.
//
//	GPU 0 (H100): 3g.40gb@0 mig3g-batch (batch 200), 3g.40gb@4 mig3g-mid (mid 500)
//	GPU 1 (H100): 1g.10gb@0..2 mig1g-0..2 (low 100), 1g.10gb@3..6 free
func TestPreemptionMIGProfile(t *testing.T) {
	c := requireExtender(t)
	t.Parallel()
	requirePreemptVerb(t, c)
	ensurePriorityClasses(t, c)

	s := newScenario(t, c, "mig")
	name := s.nodeName("h100")
	b := newTopo(name)
	n0 := b.numa(b.socket(), "0-31", 262144)
	g0 := b.migGPU(n0, h100Model, migInstances("3g.40gb", 4, 0, 4)...)
	g1 := b.migGPU(n0, h100Model, migInstances("1g.10gb", 1, 0, 1, 2, 3, 4, 5, 6)...)
	topo := b.build()
	mig := func(gpu, start int) flextopo.MIGInstance {
		return flextopo.MIGInstance{UUID: flextopo.MIGUUID(name, gpu, start)}
	}
	node := s.addNode("h100", topo.JSON(), 32, 262144, 0, corev1.ResourceList{
		"nvidia.com/mig-3g.40gb": resource.MustParse("2"),
		"nvidia.com/mig-1g.10gb": resource.MustParse("7"),
	})
	s.topos[node] = topo
	s.waitExtenderSees(node)

	var held []heldPod
	for i := 0; i < 3; i++ {
		held = append(held, heldPod{name: fmt.Sprintf("mig1g-%d", i), class: pcLow, mig: []flextopo.MIGInstance{mig(g1, i)}, startAgo: time.Hour})
	}
	// The 3g.40gb holders last: once the extender refuses a 3g.40gb probe
	// it has seen every held pod (the watch delivers them in order).
	held = append(held,
		heldPod{name: "mig3g-batch", class: pcBatch, mig: []flextopo.MIGInstance{mig(g0, 0)}, startAgo: 2 * time.Hour},
		heldPod{name: "mig3g-mid", class: pcMid, mig: []flextopo.MIGInstance{mig(g0, 4)}, startAgo: 2 * time.Hour})
	s.createHeldPods(node, "", held)
	want3g := corev1.ResourceList{"nvidia.com/mig-3g.40gb": resource.MustParse("1")}
	s.waitExtenderRejects(node, podSpec{cpu: "100m", memory: "64Mi", extended: want3g})

	o := s.runPreemption("flextopo preempt verb", node, held,
		podSpec{name: "mig3g-high", cpu: "500m", memory: "1Gi", extended: want3g, priorityClass: pcHigh},
		preemptMinPending, preemptSettle)
	o.aligned = "n/a"
	table := comparisonTable("MIG scenario, H100 with 2x 3g.40gb + 7x 1g.10gb, preemptor nvidia.com/mig-3g.40gb: 1:", o)
	t.Log("\n" + table)
	writeReport(t, c, table)
	if want := []string{"mig3g-batch"}; !sameSet(o.victims, want) {
		t.Errorf("victims %v, want %v (the only lower-priority 3g.40gb holder below priority 500)", o.victims, want)
	}
	if !o.bound {
		t.Fatalf("the MIG preemptor did not bind: %s", o.condition)
	}
	if o.alloc == nil || len(o.alloc.MIG) != 1 {
		t.Fatalf("allocation %+v: want exactly one MIG instance", o.alloc)
	}
	got := o.alloc.MIG[0]
	if wantUUID := mig(g0, 0).UUID; got.UUID != wantUUID || got.Profile != "3g.40gb" {
		t.Errorf("allocation mig %s %s, want 3g.40gb %s (the instance mig3g-batch held)", got.Profile, got.UUID, wantUUID)
	}
}

// TestPreemptionEmptyVictimList (kubernetes PR #135486): a node the
// in-tree filters pass with zero victims (a free GPU, enough CPUs by count)
// but whose free GPU has no free CPUs beside it:
//
//	NUMA 0: GPU 0 free, CPUs 0-7 pinned by cpu-low (low 100)
//	NUMA k: gpu-k (batch-hi 300, GPU k, 4 CPUs), k = 1..7
//
// kube-scheduler with #135486 sends the node to the preempt verb with an
// empty victim list and flextopo answers {cpu-low}; before it, the dry run
// fails with "expected at least one victim pod on node" and the extender is
// never asked. #135486 is first in v1.38.0-alpha.1 (CHANGELOG-1.38.md,
// "Changelog since v1.37.0"); v1.37.0 and v1.37.1 still have the error path,
// and the module proxy serves no v1.38 module. On older versions the test
// checks that behaviour and then skips.
func TestPreemptionEmptyVictimList(t *testing.T) {
	c := requireExtender(t)
	t.Parallel()
	requirePreemptVerb(t, c)
	ensurePriorityClasses(t, c)
	version, minor := serverMinor(t, c)

	held := []heldPod{{name: "cpu-low", class: pcLow, cpus: "0-7", startAgo: 2 * time.Hour}}
	for k := 1; k < 8; k++ {
		held = append(held, heldPod{name: fmt.Sprintf("gpu-%d", k), class: pcBatchHi, gpus: []int{k}, cpus: cpuRange(8*k, 8*k+3), startAgo: time.Hour})
	}
	s := newScenario(t, c, "empty")
	topo := rtx4090Node(s.nodeName("rtx"))
	node := s.addTopologyNode("rtx", topo)
	s.waitExtenderSees(node)
	s.createHeldPods(node, "", held)
	// GPU 0 is free but its NUMA node has no free CPU.
	s.waitExtenderRejects(node, podSpec{cpu: "1", memory: "64Mi", gpus: 1, guaranteed: true, affinity: "numa", mode: "guaranteed"})

	const fixedMinor = 38
	if minor < fixedMinor {
		o := s.runPreemption("flextopo preempt verb", node, held, llmPreemptor("guaranteed"), 12*time.Second, 10*time.Second)
		t.Log("\n" + comparisonTable("Empty victim list ("+version+"):", o))
		if o.bound {
			t.Fatalf("%s: the preemptor bound to %s; expected it to stay pending (no #135486)", version, o.node)
		}
		if len(o.victims) != 0 {
			t.Errorf("%s: pods were evicted %v; the node should never have reached preemption", version, o.victims)
		}
		wantMsg := fmt.Sprintf("expected at least one victim pod on node %q", node)
		if !strings.Contains(o.condition, wantMsg) {
			t.Errorf("%s: PodScheduled message %q does not contain %q", version, o.condition, wantMsg)
		}
		re := regexp.MustCompile(regexp.QuoteMeta(`expected at least one victim pod on node \"` + node + `\"`))
		n := logMatches(c.Scheduler, re)
		t.Logf("kube-scheduler log: %d lines with the \"expected at least one victim\" error for %s", n, node)
		if n == 0 {
			t.Errorf("kube-scheduler log has no \"expected at least one victim pod on node\" line for %s", node)
		}
		if len(o.decisions) != 0 {
			t.Errorf("the extender's preempt verb was called for %s: %v", node, o.decisions)
		}
		t.Skipf("kube-scheduler %s lacks kubernetes PR #135486 (first in v1.38.0-alpha.1; the module proxy has no v1.38 module): "+
			"a node rejected only by the extender's filter never reaches the preempt verb (checked: pending, %q, no preempt call)", version, wantMsg)
	}

	o := s.runPreemption("flextopo preempt verb", node, held, llmPreemptor("guaranteed"), preemptMinPending, preemptSettle)
	checkFreedAligned(o, topo, held, 1, 6)
	t.Log("\n" + comparisonTable("Empty victim list ("+version+"):", o))
	if want := []string{"cpu-low"}; !sameSet(o.victims, want) {
		t.Errorf("victims %v, want %v", o.victims, want)
	}
	if !o.bound {
		t.Fatalf("the preemptor did not bind: %s", o.condition)
	}
	checkNUMAAllocation(t, "llm", o.alloc, topo, 6, 1)
	checkPlacementFree(t, o, topo, held)
}

// TestPreemptionDropsNodeWithoutAlignedSet (guaranteed mode): two
// 8x RTX 4090 nodes. On "scattered" every GPU is held by a low-priority pod
// with one CPU, and six more CPUs of each NUMA node are pinned by pods of the
// preemptor's own priority (never victims): evicting everything evictable
// still leaves at most 2 free CPUs beside a GPU. kube-scheduler, counting,
// proposes one low-priority pod there (the cheapest candidate). On "costly"
// the only aligned sets evict a priority-500 pod. flextopo must drop
// "scattered" and preempt on "costly".
func TestPreemptionDropsNodeWithoutAlignedSet(t *testing.T) {
	c := requireExtender(t)
	t.Parallel()
	requirePreemptVerb(t, c)
	ensurePriorityClasses(t, c)

	s := newScenario(t, c, "drop")
	var scattered, costly []heldPod
	for k := 0; k < 8; k++ {
		scattered = append(scattered,
			heldPod{name: fmt.Sprintf("pin-%d", k), class: pcHigh, cpus: cpuRange(8*k+2, 8*k+7), startAgo: 3 * time.Hour},
			heldPod{name: fmt.Sprintf("lowgpu-%d", k), class: pcLow, gpus: []int{k}, cpus: strconv.Itoa(8 * k), startAgo: time.Duration(8-k) * time.Hour})
		costly = append(costly,
			heldPod{name: fmt.Sprintf("midgpu-%d", k), class: pcMid, gpus: []int{k}, cpus: cpuRange(8*k, 8*k+3), startAgo: time.Duration(8-k) * time.Hour})
	}
	topoS := rtx4090Node(s.nodeName("scattered"))
	nodeS := s.addTopologyNode("scattered", topoS)
	topoC := rtx4090Node(s.nodeName("costly"))
	nodeC := s.addTopologyNode("costly", topoC)
	s.waitExtenderSees(nodeS, nodeC)
	s.createHeldPods(nodeS, "", scattered)
	s.createHeldPods(nodeC, "", costly)
	probe := podSpec{cpu: "100m", memory: "64Mi", gpus: 1, affinity: "node", mode: "best-effort"}
	s.waitExtenderRejects(nodeS, probe)
	s.waitExtenderRejects(nodeC, probe)

	all := append(append([]heldPod(nil), scattered...), costly...)
	o := s.runPreemption("flextopo preempt verb", s.id+"-", all, llmPreemptor("guaranteed"), preemptMinPending, preemptSettle)
	checkFreedAligned(o, topoC, costly, 1, 6)
	table := comparisonTable("Two nodes, no aligned set on \"scattered\" (cheapest by count), aligned sets cost priority 500 on \"costly\":", o)
	t.Log("\n" + table)
	writeReport(t, c, table)
	for _, v := range o.victims {
		if strings.HasPrefix(v, "lowgpu-") || strings.HasPrefix(v, "pin-") {
			t.Errorf("pod %s on %s was evicted: no victim set there frees an aligned placement, the node should have been dropped", v, nodeS)
		}
	}
	if len(o.victims) != 1 || !strings.HasPrefix(o.victims[0], "midgpu-") {
		t.Errorf("victims %v, want exactly one midgpu-* pod on %s", o.victims, nodeC)
	}
	if !o.bound {
		t.Fatalf("the preemptor did not bind: %s", o.condition)
	}
	if o.node != nodeC {
		t.Fatalf("the preemptor bound to %s, want %s", o.node, nodeC)
	}
	checkNUMAAllocation(t, "llm", o.alloc, topoC, 6, 1)
	checkPlacementFree(t, o, topoC, costly)
}

// TestPreemptionNodeCacheIncapable (both nodeCacheCapable modes):
// the paper's scenario through a kube-scheduler whose extender entry has
// nodeCacheCapable false, so the preempt verb receives NodeNameToVictims with
// full Pod objects instead of UIDs. The outcome must be the same.
func TestPreemptionNodeCacheIncapable(t *testing.T) {
	c := requireExtender(t)
	t.Parallel()
	requirePreemptVerb(t, c)
	ensurePriorityClasses(t, c)
	requireNoCacheScheduler(t, c)

	held := paperHeld()
	v := preemptionVariant{label: "flextopo preempt verb, nodeCacheCapable false", id: "paper-nc", schedulerName: schedNoCache}
	o, topo := runOn8x4090(t, c, v, held, llmPreemptor("guaranteed"))
	checkFreedAligned(o, topo, held, 1, 6)
	table := comparisonTable("Paper scenario, nodeCacheCapable false:", o)
	t.Log("\n" + table)
	writeReport(t, c, table)
	checkPaperOutcome(t, o, topo, held)
}

// checkPaperOutcome: in the paper's scenario (paperHeld) the victims are
// the cheapest aligned set, {gpu-b, cpu-c}, and the preemptor binds with
// its GPU and six CPUs on one NUMA node, on units that are free.
func checkPaperOutcome(t *testing.T, o *preemptionOutcome, topo *flextopo.Topology, held []heldPod) {
	t.Helper()
	if want := []string{"cpu-c", "gpu-b"}; !sameSet(o.victims, want) {
		t.Errorf("victims %v, want %v", o.victims, want)
	}
	if !o.bound {
		t.Fatalf("the preemptor did not bind: %s", o.condition)
	}
	checkNUMAAllocation(t, "llm", o.alloc, topo, 6, 1)
	checkPlacementFree(t, o, topo, held)
}
