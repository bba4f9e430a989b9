package e2e

// MIG placement under the packed and distributed policies, capability
// matching (flextopo.io/requires) and fractions of time-sliced GPUs, each
// against a real kube-scheduler.
//
// Every pod sets flextopo.io/allocation-policy, so both policies run in one
// cluster whatever the extender's configured default. Pods are created one
// at a time and each waits for its allocation: every choice is checked
// against the state the test has observed so far.

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"flextopo.dev/e2e/internal/flextopo"
)

const (
	resMIG1g  corev1.ResourceName = "nvidia.com/mig-1g.10gb"
	resMIG3g  corev1.ResourceName = "nvidia.com/mig-3g.40gb"
	resShared corev1.ResourceName = "nvidia.com/gpu.shared"

	policyPacked      = "packed"
	policyDistributed = "distributed"
)

func count(n int) resource.Quantity { return *resource.NewQuantity(int64(n), resource.DecimalSI) }

// devicePod is a small pod asking n of resource res under policy; more
// annotations may follow in ann.
func devicePod(name, policy string, res corev1.ResourceName, n int, ann map[string]string) podSpec {
	all := map[string]string{flextopo.AnnPolicy: policy}
	for k, v := range ann {
		all[k] = v
	}
	return podSpec{name: name, cpu: "100m", memory: "64Mi", annotations: all,
		extended: corev1.ResourceList{res: count(n)}}
}

// migLedger follows which MIG instances of one node are held, so that each
// choice can be checked against what the policy promises.
type migLedger struct {
	node string
	topo *flextopo.Topology
	held map[string]string // instance uuid -> pod
}

func newMIGLedger(node string, topo *flextopo.Topology) *migLedger {
	return &migLedger{node: node, topo: topo, held: map[string]string{}}
}

// busySlices is the memory slices held on each GPU (by uuid).
func (l *migLedger) busySlices() map[string]int {
	busy := map[string]int{}
	flextopo.ForEachGPU(l.topo, func(_ int, g *flextopo.GPU) {
		if g.MIG == nil {
			return
		}
		for _, m := range g.MIG.Instances {
			if l.held[m.UUID] != "" {
				busy[g.UUID] += m.Size
			}
		}
	})
	return busy
}

// freeOn counts the free instances of profile on each GPU (by uuid).
func (l *migLedger) freeOn(profile string) map[string]int {
	free := map[string]int{}
	flextopo.ForEachGPU(l.topo, func(_ int, g *flextopo.GPU) {
		if g.MIG == nil {
			return
		}
		for _, m := range g.MIG.Instances {
			if m.Profile == profile && l.held[m.UUID] == "" {
				free[g.UUID]++
			}
		}
	})
	return free
}

// policyGPUs are the GPUs an instance of profile may come from under
// policy (docs/annotations.md, "The policy decides which MIG instance a pod
// gets"): of the GPUs with a free one, those with the most busy slices
// (packed) or the fewest (distributed). Sorted; ties are all listed.
func (l *migLedger) policyGPUs(profile, policy string) []string {
	busy, cand := l.busySlices(), map[string]int{}
	for gpu := range l.freeOn(profile) {
		cand[gpu] = busy[gpu]
	}
	return policyPick(cand, policy)
}

// policyPick returns the candidate GPUs (uuid -> units used) that policy
// prefers: the most used under packed, the fewest under distributed. Sorted;
// ties are all listed.
func policyPick(cand map[string]int, policy string) []string {
	var best []string
	bestV := 0
	for gpu, v := range cand {
		if policy == policyDistributed {
			v = -v
		}
		switch {
		case best == nil || v > bestV:
			best, bestV = []string{gpu}, v
		case v == bestV:
			best = append(best, gpu)
		}
	}
	sort.Strings(best)
	return best
}

// take checks that a pod's allocation holds n instances of profile on the
// ledger's node that nobody held yet, records them and returns the GPUs
// (uuids, in allocation order) they sit on.
func (l *migLedger) take(t *testing.T, pod string, a *flextopo.Allocation, profile string, n int) []string {
	t.Helper()
	if a.Node != l.node {
		t.Fatalf("pod %s: allocated on %s, want %s", pod, a.Node, l.node)
	}
	if len(a.GPUs) != 0 || len(a.Replicas) != 0 {
		t.Errorf("pod %s: allocation has whole GPUs %v or replicas %v besides MIG instances", pod, a.GPUs, a.Replicas)
	}
	if len(a.MIG) != n {
		t.Fatalf("pod %s: allocation mig %+v, want %d instance(s)", pod, a.MIG, n)
	}
	var gpus []string
	for _, m := range a.MIG {
		gpu, inst, ok := l.topo.MIGInstanceOf(m.UUID)
		switch {
		case !ok:
			t.Fatalf("pod %s: MIG instance %s is not on node %s", pod, m.UUID, l.node)
		case inst.Profile != profile || m.Profile != profile:
			t.Errorf("pod %s: MIG instance %s is %s (allocation says %s), want %s", pod, m.UUID, inst.Profile, m.Profile, profile)
		case m.GPU != gpu || m.Start != inst.Start || m.Size != inst.Size:
			t.Errorf("pod %s: allocation entry %+v disagrees with the topology (GPU %s, start %d, size %d)",
				pod, m, gpu, inst.Start, inst.Size)
		case l.held[m.UUID] != "":
			t.Errorf("pod %s: MIG instance %s is already held by %s", pod, m.UUID, l.held[m.UUID])
		}
		l.held[m.UUID] = pod
		gpus = append(gpus, gpu)
	}
	return gpus
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestMIGPackedFillsBusyGPUDistributedSpreads: on an H100 node with a mixed
// MIG layout, packed 1g.10gb pods fill the GPU that already has used slices
// and distributed ones spread over the emptiest GPUs, one pod's instances
// included; for 3g.40gb the same promise decides between a GPU of two
// 3g.40gb and one that also has 1g.10gb slices. A whole-GPU pod goes to the
// whole-GPU node.
//
//	h100-mig    GPU 0: 3g.40gb at 0 and 4
//	            GPU 1: 1g.10gb x7
//	            GPU 2: 1g.10gb x7, slot 0 held by "holder" from the start
//	            GPU 3: 3g.40gb at 0, 1g.10gb at 4, 5, 6
//	h100-whole  2 whole H100, NVLinked
//
// Without the holder, packed and distributed would both start on GPU 1
// (ties go to the first instance); the holder makes GPU 2 the busy one.
func TestMIGPackedFillsBusyGPUDistributedSpreads(t *testing.T) {
	c := requireExtender(t)
	t.Parallel()
	s := newScenario(t, c, "migpolicy")

	mb := newTopo(s.nodeName("h100-mig"))
	mn := mb.numa(mb.socket(), "0-31", 262144)
	mb.migGPU(mn, h100Model, migInstances("3g.40gb", 4, 0, 4)...)
	mb.migGPU(mn, h100Model, migInstances("1g.10gb", 1, 0, 1, 2, 3, 4, 5, 6)...)
	busyGPU := mb.migGPU(mn, h100Model, migInstances("1g.10gb", 1, 0, 1, 2, 3, 4, 5, 6)...)
	mb.migGPU(mn, h100Model, append(migInstances("3g.40gb", 4, 0), migInstances("1g.10gb", 1, 4, 5, 6)...)...)
	migTopo := mb.build()
	mig := s.addTopologyNode("h100-mig", migTopo)

	wb := newTopo(s.nodeName("h100-whole")).gpuModel(h100Model, h100MemMiB)
	w := wb.switchGPUs(wb.numa(wb.socket(), "0-31", 262144), 2)
	wb.nvlink(w[0], w[1], 18)
	whole := s.addTopologyNode("h100-whole", wb.build())
	s.waitExtenderSees(mig, whole)

	ledger := newMIGLedger(mig, migTopo)
	holder := heldPod{name: "holder", mig: []flextopo.MIGInstance{{UUID: flextopo.MIGUUID(mig, busyGPU, 0)}}}
	s.createHeldPods(mig, "", []heldPod{holder})
	ledger.held[holder.mig[0].UUID] = holder.name
	// Once the extender refuses all seventeen 1g.10gb instances, its watch
	// has delivered the holder.
	s.waitExtenderRejects(mig, podSpec{cpu: "100m", memory: "64Mi", extended: corev1.ResourceList{resMIG1g: count(17)}})

	s.createPod(devicePod("whole", policyPacked, flextopo.ResGPU, 1, nil))
	pod, a := s.waitScheduled("whole")
	if pod.Spec.NodeName != whole {
		t.Errorf("pod whole landed on %s, want %s", pod.Spec.NodeName, whole)
	}
	if len(a.GPUs) != 1 || !contains([]string{flextopo.GPUUUID(whole, w[0]), flextopo.GPUUUID(whole, w[1])}, a.GPUs[0]) || len(a.MIG) != 0 {
		t.Errorf("pod whole: allocation gpus %v mig %+v, want one whole GPU of %s", a.GPUs, a.MIG, whole)
	}

	// One instance per pod: each must come from a GPU the policy allows.
	placeOne := func(name, policy string, res corev1.ResourceName, profile string) string {
		t.Helper()
		allowed, before := ledger.policyGPUs(profile, policy), ledger.busySlices()
		s.createPod(devicePod(name, policy, res, 1, nil))
		_, a := s.waitScheduled(name)
		gpu := ledger.take(t, name, a, profile, 1)[0]
		if !contains(allowed, gpu) {
			t.Errorf("pod %s (%s): %s instance on GPU %s, want one on %v (busy slices before: %v)",
				name, policy, profile, gpu, allowed, before)
		}
		return gpu
	}
	busy := flextopo.GPUUUID(mig, busyGPU)
	for i := 0; i < 3; i++ {
		if gpu := placeOne(fmt.Sprintf("packed-%d", i), policyPacked, resMIG1g, "1g.10gb"); gpu != busy {
			t.Errorf("packed-%d: on GPU %s, want %s, the GPU that already had used slices", i, gpu, busy)
		}
	}
	spread := map[string]bool{}
	for i := 0; i < 3; i++ {
		gpu := placeOne(fmt.Sprintf("distributed-%d", i), policyDistributed, resMIG1g, "1g.10gb")
		if gpu == busy {
			t.Errorf("distributed-%d: on %s, the fullest GPU", i, gpu)
		}
		spread[gpu] = true
	}
	if len(spread) < 2 {
		t.Errorf("distributed 1g.10gb pods all on %v, want them spread over GPUs 1 and 3", spread)
	}

	// Two instances in one pod: packed keeps them on the fullest GPU with
	// two free, distributed puts them on two GPUs.
	allowed := ledger.policyGPUs("1g.10gb", policyPacked)
	s.createPod(devicePod("packed-pair", policyPacked, resMIG1g, 2, nil))
	_, a = s.waitScheduled("packed-pair")
	if gpus := ledger.take(t, "packed-pair", a, "1g.10gb", 2); gpus[0] != gpus[1] || !contains(allowed, gpus[0]) {
		t.Errorf("packed-pair: instances on GPUs %v, want both on one of %v", gpus, allowed)
	}
	s.createPod(devicePod("distributed-pair", policyDistributed, resMIG1g, 2, nil))
	_, a = s.waitScheduled("distributed-pair")
	if gpus := ledger.take(t, "distributed-pair", a, "1g.10gb", 2); gpus[0] == gpus[1] || contains(gpus, busy) {
		t.Errorf("distributed-pair: instances on GPUs %v, want two different GPUs, not the fullest %s", gpus, busy)
	}

	// 3g.40gb: GPU 0 (two, nothing used) against GPU 3 (one, beside used
	// 1g.10gb slices). Distributed takes the empty GPU; packed then fills
	// the GPU just used rather than open GPU 3's.
	placeOne("distributed-3g", policyDistributed, resMIG3g, "3g.40gb")
	placeOne("packed-3g", policyPacked, resMIG3g, "3g.40gb")
}

// TestRequiresMemoryAndFP8AvoidsSmallMIG: a pod asking one GPU with
// flextopo.io/requires memoryPerGpu 40Gi and fp8 gets a 3g.40gb instance or
// a whole H100, never a 1g.10gb instance nor an fp8-less A100; with only
// those left it stays Pending with the extender's reasons.
//
// The MIG nodes h100-1g and h100-3g run MIG strategy single, so
// nvidia.com/gpu is a MIG instance there and the pod's request alone does
// not tell a 1g.10gb from a 3g.40gb. On h100-mixed (strategy mixed) the
// profile is in the resource name, and the requirement refuses 1g.10gb.
//
//	h100-1g     one H100, 1g.10gb x7            nvidia.com/gpu: 7
//	h100-3g     one H100, 3g.40gb x2            nvidia.com/gpu: 2
//	h100        one whole H100                  nvidia.com/gpu: 1
//	a100        one whole A100 80GB (no fp8)    nvidia.com/gpu: 1
//	h100-mixed  GPU 0: 3g.40gb x2, GPU 1: 1g.10gb x7
//	            nvidia.com/mig-3g.40gb: 2, nvidia.com/mig-1g.10gb: 7
func TestRequiresMemoryAndFP8AvoidsSmallMIG(t *testing.T) {
	c := requireExtender(t)
	t.Parallel()
	s := newScenario(t, c, "fp8")

	b1 := newTopo(s.nodeName("h100-1g"))
	b1.migGPU(b1.numa(b1.socket(), "0-15", 131072), h100Model, migInstances("1g.10gb", 1, 0, 1, 2, 3, 4, 5, 6)...)
	small := s.addTopologyNode("h100-1g", b1.build())
	b3 := newTopo(s.nodeName("h100-3g"))
	b3.migGPU(b3.numa(b3.socket(), "0-15", 131072), h100Model, migInstances("3g.40gb", 4, 0, 4)...)
	big := s.addTopologyNode("h100-3g", b3.build())
	bh := newTopo(s.nodeName("h100")).gpuModel(h100Model, h100MemMiB)
	bh.switchGPUs(bh.numa(bh.socket(), "0-15", 131072), 1)
	h100 := s.addTopologyNode("h100", bh.build())
	ba := newTopo(s.nodeName("a100")).gpuModel(a100Model, a100MemMiB)
	ba.switchGPUs(ba.numa(ba.socket(), "0-15", 131072), 1)
	a100 := s.addTopologyNode("a100", ba.build())
	bm := newTopo(s.nodeName("h100-mixed"))
	mn := bm.numa(bm.socket(), "0-15", 131072)
	bm.migGPU(mn, h100Model, migInstances("3g.40gb", 4, 0, 4)...)
	bm.migGPU(mn, h100Model, migInstances("1g.10gb", 1, 0, 1, 2, 3, 4, 5, 6)...)
	mixed := s.addTopologyNode("h100-mixed", bm.build())
	nodes := []string{small, big, h100, a100}
	s.waitExtenderSees(append(nodes, mixed)...)

	requires := map[string]string{flextopo.AnnRequires: `{"memoryPerGpu":"40Gi","precision":["fp8"]}`}
	fp8 := func(name string) podSpec {
		return podSpec{name: name, gpus: 1, cpu: "100m", memory: "64Mi", annotations: requires}
	}
	smallMIG := "requires: 0 of 7 MIG 1g.10gb instances match (memoryPerGpu 40Gi: 10240 MiB)"

	// h100-mixed: a 3g.40gb instance meets the requirement, a 1g.10gb
	// instance does not.
	mig1g := devicePod("", policyPacked, resMIG1g, 1, requires)
	if _, failed, err := s.extenderFilter(mig1g, []string{mixed}); err != nil || failed[mixed] != smallMIG {
		t.Errorf("extender on %s for 1g.10gb with the requirement: refused %v (error %v), want %q", mixed, failed, err, smallMIG)
	}
	s.createPod(devicePod("fp8-mig", policyPacked, resMIG3g, 1, requires))
	pod, a := s.waitScheduled("fp8-mig")
	if pod.Spec.NodeName != mixed || len(a.MIG) != 1 || a.MIG[0].Profile != "3g.40gb" || a.MIG[0].GPU != flextopo.GPUUUID(mixed, 0) {
		t.Errorf("pod fp8-mig: on %s with mig %+v, want a 3g.40gb instance of GPU 0 of %s", pod.Spec.NodeName, a.MIG, mixed)
	}

	// The extender's own verdicts, with every unit free.
	passed, failed, err := s.extenderFilter(fp8(""), nodes)
	if err != nil {
		t.Fatalf("extender /filter: %v", err)
	}
	if !sameSet(passed, []string{big, h100}) {
		t.Errorf("extender passes %v for the fp8 pod, want %s and %s; refused: %v", passed, big, h100, failed)
	}
	reasons := map[string]string{
		small: smallMIG,
		a100:  "requires: 0 of 1 GPUs match (precision fp8: not supported by " + a100Model + ")",
	}
	for node, want := range reasons {
		if failed[node] != want {
			t.Errorf("extender refuses %s with %q, want %q", node, failed[node], want)
		}
	}

	onBig, onH100 := map[string]bool{}, 0
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("fp8-%d", i)
		s.createPod(fp8(name))
		pod, a := s.waitScheduled(name)
		switch pod.Spec.NodeName {
		case big:
			if len(a.GPUs) != 0 || len(a.MIG) != 1 || a.MIG[0].Profile != "3g.40gb" || a.MIG[0].GPU != flextopo.GPUUUID(big, 0) {
				t.Errorf("pod %s on %s: allocation gpus %v mig %+v, want one 3g.40gb instance", name, big, a.GPUs, a.MIG)
			} else if onBig[a.MIG[0].UUID] {
				t.Errorf("pod %s: 3g.40gb instance %s given twice", name, a.MIG[0].UUID)
			} else {
				onBig[a.MIG[0].UUID] = true
			}
		case h100:
			if len(a.MIG) != 0 || !sameSet(a.GPUs, []string{flextopo.GPUUUID(h100, 0)}) {
				t.Errorf("pod %s on %s: allocation gpus %v mig %+v, want the whole H100", name, h100, a.GPUs, a.MIG)
			}
			onH100++
		default:
			t.Errorf("pod %s landed on %s, want a 3g.40gb instance on %s or the whole H100 on %s", name, pod.Spec.NodeName, big, h100)
		}
	}
	if len(onBig) != 2 || onH100 != 1 {
		t.Errorf("fp8 pods: %d on 3g.40gb instances, %d on the whole H100; want 2 and 1", len(onBig), onH100)
	}

	// Only 1g.10gb instances and the A100 are left: by count both fit,
	// kube-scheduler's own filters pass them, the extender refuses them.
	s.createPod(fp8("fp8-3"))
	msg := s.waitUnschedulable("fp8-3")
	t.Logf("pod fp8-3 stays Pending: %s", msg)
	for _, want := range reasons {
		if !strings.Contains(msg, want) {
			t.Errorf("pod fp8-3: the scheduling failure %q lacks the extender's reason %q", msg, want)
		}
	}

	// A pod that requires nothing still fits there.
	s.createPod(podSpec{name: "plain", gpus: 1, cpu: "100m", memory: "64Mi"})
	pod, a = s.waitScheduled("plain")
	if n := pod.Spec.NodeName; n != small && n != a100 {
		t.Errorf("pod plain landed on %s, want %s or %s (the only free units)", n, small, a100)
	}
	if len(a.GPUs)+len(a.MIG) != 1 {
		t.Errorf("pod plain: allocation gpus %v mig %+v, want one unit", a.GPUs, a.MIG)
	}
}

// TestSharedGPUFractionsFillNVLinkPair: on four H100 time-sliced 10 ways,
// two ranks of 0.8 GPU with nvlink affinity take 8 replicas on each GPU of
// one NVLink pair, and 0.2 pods then follow the policy GPU by GPU: packed
// ones fill the 2 replicas left beside the ranks, distributed ones take
// untouched GPUs.
//
// The pairs run across the PCIe switches, (0,2) and (1,3), so neither the
// first two GPUs nor the GPUs of one switch are a pair.
func TestSharedGPUFractionsFillNVLinkPair(t *testing.T) {
	c := requireExtender(t)
	t.Parallel()
	s := newScenario(t, c, "sharedgpu")

	const replicas = 10
	b := newTopo(s.nodeName("h100-shared")).gpuModel(h100Model, h100MemMiB)
	n := b.numa(b.socket(), "0-31", 262144)
	sw0 := b.switchGPUs(n, 2)
	sw1 := b.switchGPUs(n, 2)
	b.nvlink(sw0[0], sw1[0], 18)
	b.nvlink(sw0[1], sw1[1], 18)
	b.share(replicas, string(resShared))
	node := s.addTopologyNode("h100-shared", b.build())
	s.waitExtenderSees(node)
	pairs := [][]string{
		{flextopo.GPUUUID(node, sw0[0]), flextopo.GPUUUID(node, sw1[0])},
		{flextopo.GPUUUID(node, sw0[1]), flextopo.GPUUUID(node, sw1[1])},
	}
	ledger := &replicaLedger{replicas: replicas, used: map[string]int{}}
	for _, p := range pairs {
		ledger.gpus = append(ledger.gpus, p...)
	}

	// place schedules a pod and returns its replicas, checked against the
	// GPUs' capacity and added to the ledger.
	place := func(ps podSpec) []flextopo.ReplicaAllocation {
		t.Helper()
		s.createPod(ps)
		pod, a := s.waitScheduled(ps.name)
		if pod.Spec.NodeName != node || len(a.GPUs) != 0 || len(a.MIG) != 0 || len(a.Replicas) == 0 {
			t.Fatalf("pod %s: on %s with gpus %v mig %+v replicas %+v, want only replicas on %s",
				ps.name, pod.Spec.NodeName, a.GPUs, a.MIG, a.Replicas, node)
		}
		ledger.take(t, ps.name, a.Replicas)
		return a.Replicas
	}
	// small places one 0.2 rank and checks it took 2 replicas of a GPU its
	// policy allows; it returns that GPU.
	small := func(name, policy string) string {
		t.Helper()
		allowed := ledger.policyGPUs(2, policy)
		before := ledger.String()
		got := place(devicePod(name, policy, resShared, 1, map[string]string{flextopo.AnnFraction: "0.2"}))
		if len(got) != 1 || got[0].Count != 2 || !contains(allowed, got[0].GPU) {
			t.Errorf("pod %s (%s): replicas %+v, want 2 on one of %v (replicas used before: %s)",
				name, policy, got, allowed, before)
		}
		return got[0].GPU
	}

	ranks := devicePod("ranks", policyPacked, resShared, 2, map[string]string{flextopo.AnnFraction: "0.8"})
	ranks.affinity, ranks.mode = "nvlink", "guaranteed"
	pair := checkRanksOnPair(t, "ranks", place(ranks), pairs)

	// The first leftover, then an untouched GPU, then the second leftover.
	left := small("small-packed", policyPacked)
	apart := small("small-distributed", policyDistributed)
	if contains(pair, apart) {
		t.Errorf("small-distributed on %s, a GPU of the ranks' pair %v", apart, pair)
	}
	if last := small("small-packed-2", policyPacked); !sameSet([]string{left, last}, pair) {
		t.Errorf("packed 0.2 pods on %s and %s, want the leftovers of both GPUs of %v", left, last, pair)
	}
	// The pair is full: packed goes beside small-distributed, distributed
	// to the GPU nobody uses yet.
	if beside := small("small-packed-3", policyPacked); beside != apart {
		t.Errorf("small-packed-3 on %s, want %s (the GPU with replicas used)", beside, apart)
	}
	if fresh := small("small-distributed-2", policyDistributed); fresh == apart || contains(pair, fresh) {
		t.Errorf("small-distributed-2 on %s, want the untouched GPU", fresh)
	}
	t.Logf("replicas held: %s", ledger)
}

// replicaLedger follows the replicas held on the shared GPUs of one node.
type replicaLedger struct {
	replicas int      // per GPU
	gpus     []string // uuids
	used     map[string]int
}

// take records a pod's replicas, failing the test when a GPU overflows.
func (l *replicaLedger) take(t *testing.T, pod string, got []flextopo.ReplicaAllocation) {
	t.Helper()
	for _, r := range got {
		if !contains(l.gpus, r.GPU) {
			t.Fatalf("pod %s: replicas on unknown GPU %s", pod, r.GPU)
		}
		l.used[r.GPU] += r.Count
		if l.used[r.GPU] > l.replicas {
			t.Errorf("pod %s: GPU %s now has %d of %d replicas held", pod, r.GPU, l.used[r.GPU], l.replicas)
		}
	}
}

// policyGPUs are the GPUs a rank of `need` replicas may take under policy
// (docs/annotations.md, "Shared GPUs"): of those with room, the ones with the most
// replicas used (packed, filling leftovers) or the fewest (distributed).
func (l *replicaLedger) policyGPUs(need int, policy string) []string {
	cand := map[string]int{}
	for _, g := range l.gpus {
		if l.replicas-l.used[g] >= need {
			cand[g] = l.used[g]
		}
	}
	return policyPick(cand, policy)
}

func (l *replicaLedger) String() string {
	var parts []string
	for _, g := range l.gpus {
		parts = append(parts, fmt.Sprintf("%s:%d", g, l.used[g]))
	}
	return strings.Join(parts, " ")
}

// checkRanksOnPair checks two ranks of 8 replicas on the two GPUs of one
// NVLink pair and returns that pair.
func checkRanksOnPair(t *testing.T, pod string, got []flextopo.ReplicaAllocation, pairs [][]string) []string {
	t.Helper()
	var gpus []string
	for _, r := range got {
		if r.Count != 8 {
			t.Errorf("pod %s: %d replicas on GPU %s, want 8 (0.8 of 10)", pod, r.Count, r.GPU)
		}
		gpus = append(gpus, r.GPU)
	}
	for _, p := range pairs {
		if sameSet(gpus, p) {
			return p
		}
	}
	t.Fatalf("pod %s: replicas on GPUs %v, want the two GPUs of one NVLink pair %v", pod, gpus, pairs)
	return nil
}
