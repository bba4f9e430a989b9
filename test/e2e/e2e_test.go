package e2e

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

// TestControlPlane checks the harness itself: the API server answers, nodes
// created through the API are Ready with GPU capacity, pods can be created,
// and (when the extender runs) a plain pod gets bound.
func TestControlPlane(t *testing.T) {
	c := requireCluster(t)
	cx := harness.Ctx(t, 30*time.Second)

	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	t.Logf("kube-apiserver %s (%s)", v.GitVersion, v.GoVersion)

	s := newScenario(t, c, "cp")
	b := newTopo(s.nodeName("n1"))
	n0 := b.numa(b.socket(), "0-7", 32768)
	b.nvlink(b.switchGPUs(n0, 2)[0], 1, 4)
	name := s.addTopologyNode("n1", b.build())

	node, err := c.Client.CoreV1().Nodes().Get(cx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node: %v", err)
	}
	if q := node.Status.Allocatable[flextopo.ResGPU]; q.Value() != 2 {
		t.Errorf("node %s: allocatable %s = %s, want 2", name, flextopo.ResGPU, q.String())
	}
	ready := false
	for _, cond := range node.Status.Conditions {
		ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
	}
	if !ready {
		t.Errorf("node %s is not Ready: %+v", name, node.Status.Conditions)
	}
	if len(node.Spec.Taints) != 0 {
		t.Errorf("node %s has taints %v; pods would not schedule", name, node.Spec.Taints)
	}

	s.createPod(podSpec{name: "plain", cpu: "100m", memory: "64Mi"})
	if c.Extender == nil {
		t.Logf("no extender: not waiting for the pod to be scheduled (%s)", skipReason)
		return
	}
	s.waitExtenderSees(name)
	pod := s.waitBound("plain", false)
	if pod.Spec.NodeName != name {
		t.Errorf("pod plain bound to %s, want %s", pod.Spec.NodeName, name)
	}
}

// (a) A pod asking for a guaranteed NVLink pair lands on the node that has a
// linked pair free, not on a node with plenty of unlinked GPUs, and receives
// exactly the linked pair. A second such pod then finds no pair anywhere and
// stays Pending.
func TestNVLinkPairPreferredOverUnlinkedGPUs(t *testing.T) {
	c := requireExtender(t)
	s := newScenario(t, c, "nvlink")

	// 8 PCIe GPUs in two switches, no NVLink; bigger in every resource so
	// the in-tree scoring alone would pick it.
	pb := newTopo(s.nodeName("pcie-only"))
	pn := pb.numa(pb.socket(), "0-31", 262144)
	pb.switchGPUs(pn, 4)
	pb.switchGPUs(pn, 4)
	pcie := s.addTopologyNode("pcie-only", pb.build())

	// 4 GPUs in two switches; the only NVLink pair is (1,2), across the
	// switches, so neither "first two GPUs" nor "same switch" is right.
	nb := newTopo(s.nodeName("nvlink-pair"))
	nn := nb.numa(nb.socket(), "0-15", 65536)
	sw0 := nb.switchGPUs(nn, 2)
	sw1 := nb.switchGPUs(nn, 2)
	nb.nvlink(sw0[1], sw1[0], 4)
	nvTopo := nb.build()
	nvlink := s.addTopologyNode("nvlink-pair", nvTopo)
	s.waitExtenderSees(pcie, nvlink)

	spec := podSpec{name: "pair", gpus: 2, cpu: "1", memory: "1Gi", affinity: "nvlink", mode: "guaranteed"}
	s.createPod(spec)
	pod, a := s.waitScheduled("pair")
	if pod.Spec.NodeName != nvlink {
		t.Fatalf("pod pair landed on %s, want %s (the only node with an NVLink pair)", pod.Spec.NodeName, nvlink)
	}
	wantGPUs := []string{flextopo.GPUUUID(nvlink, 1), flextopo.GPUUUID(nvlink, 2)}
	if !sameSet(a.GPUs, wantGPUs) {
		t.Errorf("allocation gpus %v, want the linked pair %v", a.GPUs, wantGPUs)
	}
	if !sameInts(a.GPUIndexes, []int{1, 2}) {
		t.Errorf("allocation gpuIndexes %v, want [1 2]", a.GPUIndexes)
	}
	if a.Level != "nvlink" {
		t.Errorf("allocation level %q, want nvlink", a.Level)
	}
	if a.Mode != "guaranteed" {
		t.Errorf("allocation mode %q, want guaranteed", a.Mode)
	}

	// GPUs 0 and 3 of nvlink-pair are free but not linked; pcie-only has 8
	// free GPUs and no links: in-tree both fit, aligned neither does.
	spec.name = "no-pair-left"
	s.createPod(spec)
	msg := s.waitUnschedulable("no-pair-left")
	t.Logf("pod no-pair-left stays Pending: %s", msg)
}

// (b) A Guaranteed pod with 8 CPUs and 2 GPUs in numa/guaranteed mode lands
// where 8 CPUs and 2 GPUs share a NUMA node, and gets CPUs and GPUs of that
// NUMA node only.
func TestNUMAGuaranteedAlignsCPUsAndGPUs(t *testing.T) {
	c := requireExtender(t)
	s := newScenario(t, c, "numa")

	// 14 CPUs and 8 GPUs in total, but each NUMA node has only 7 CPUs: the
	// in-tree fit and scoring like it, NUMA alignment cannot use it.
	sb := newTopo(s.nodeName("split"))
	so := sb.socket()
	sb.switchGPUs(sb.numa(so, "0-6", 131072), 4)
	sb.switchGPUs(sb.numa(so, "7-13", 131072), 4)
	split := s.addTopologyNode("split", sb.build())

	// NUMA 0: 4 CPUs + 1 GPU; NUMA 1: 8 CPUs + 2 GPUs (directly under the
	// NUMA node). Only NUMA 1 can hold the pod.
	ab := newTopo(s.nodeName("aligned"))
	ao := ab.socket()
	ab.directGPUs(ab.numa(ao, "0-3", 32768), 1)
	ab.directGPUs(ab.numa(ao, "4-11", 32768), 2)
	alignedTopo := ab.build()
	aligned := s.addTopologyNode("aligned", alignedTopo)
	s.waitExtenderSees(split, aligned)

	s.createPod(podSpec{name: "numa8", gpus: 2, cpu: "8", memory: "1Gi", guaranteed: true, affinity: "numa", mode: "guaranteed"})
	pod, a := s.waitScheduled("numa8")
	if pod.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Errorf("pod QoS %s, want Guaranteed", pod.Status.QOSClass)
	}
	if pod.Spec.NodeName != aligned {
		t.Fatalf("pod numa8 landed on %s, want %s", pod.Spec.NodeName, aligned)
	}
	checkNUMAAllocation(t, "numa8", a, alignedTopo, 8, 2)
	if len(a.NUMANodes) == 1 && a.NUMANodes[0] != 1 {
		t.Errorf("allocation numaNodes %v, want [1]", a.NUMANodes)
	}
	if !sameSet(a.GPUs, []string{flextopo.GPUUUID(aligned, 1), flextopo.GPUUUID(aligned, 2)}) {
		t.Errorf("allocation gpus %v, want GPUs 1 and 2 of %s", a.GPUs, aligned)
	}
	if a.MemoryMiB != 1024 {
		t.Errorf("allocation memoryMiB %d, want 1024 (the pod's 1Gi)", a.MemoryMiB)
	}
}

// checkNUMAAllocation checks a numa-level allocation: one NUMA node, a cpuset
// of wantCPUs CPUs inside it, wantGPUs GPUs attached to it.
func checkNUMAAllocation(t *testing.T, pod string, a *flextopo.Allocation, topo *flextopo.Topology, wantCPUs, wantGPUs int) {
	t.Helper()
	if a.Level != "numa" {
		t.Errorf("pod %s: allocation level %q, want numa", pod, a.Level)
	}
	if a.Mode != "guaranteed" {
		t.Errorf("pod %s: allocation mode %q, want guaranteed", pod, a.Mode)
	}
	if len(a.NUMANodes) != 1 {
		t.Errorf("pod %s: allocation numaNodes %v, want exactly one", pod, a.NUMANodes)
		return
	}
	numa := a.NUMANodes[0]
	cpus, err := flextopo.ParseCPUList(a.CPUSet)
	if err != nil {
		t.Errorf("pod %s: allocation cpuset: %v", pod, err)
	} else {
		if len(cpus) != wantCPUs {
			t.Errorf("pod %s: cpuset %q has %d CPUs, want %d", pod, a.CPUSet, len(cpus), wantCPUs)
		}
		inNUMA := topo.NUMACPUs(numa)
		for cpu := range cpus {
			if !inNUMA[cpu] {
				t.Errorf("pod %s: cpuset %q has CPU %d outside NUMA node %d", pod, a.CPUSet, cpu, numa)
			}
		}
	}
	if len(a.GPUs) != wantGPUs {
		t.Errorf("pod %s: allocation gpus %v, want %d", pod, a.GPUs, wantGPUs)
	}
	for _, g := range a.GPUs {
		if n := topo.NUMAOf(g); n != numa {
			t.Errorf("pod %s: GPU %s is on NUMA node %d, not %d", pod, g, n, numa)
		}
	}
}

// (c) Pods created together never share a GPU or a CPU: four 8-CPU/2-GPU
// NUMA-guaranteed pods on two nodes with room for exactly two each.
func TestConcurrentPodsGetDistinctGPUs(t *testing.T) {
	c := requireExtender(t)
	s := newScenario(t, c, "distinct")

	topos := map[string]*flextopo.Topology{}
	var names []string
	for _, short := range []string{"duo-a", "duo-b"} {
		b := newTopo(s.nodeName(short))
		so := b.socket()
		b.directGPUs(b.numa(so, "0-7", 65536), 2)
		b.directGPUs(b.numa(so, "8-15", 65536), 2)
		topo := b.build()
		name := s.addTopologyNode(short, topo)
		topos[name] = topo
		names = append(names, name)
	}
	s.waitExtenderSees(names...)

	pods := []string{"p0", "p1", "p2", "p3"}
	for _, p := range pods {
		s.createPod(podSpec{name: p, gpus: 2, cpu: "8", memory: "1Gi", guaranteed: true, affinity: "numa", mode: "guaranteed"})
	}

	gpuOwner := map[string]string{}
	cpuOwner := map[string]string{} // "node/cpu" -> pod
	perNode := map[string][]string{}
	for _, p := range pods {
		pod, a := s.waitScheduled(p)
		topo := topos[pod.Spec.NodeName]
		if topo == nil {
			t.Fatalf("pod %s on unexpected node %s", p, pod.Spec.NodeName)
		}
		perNode[pod.Spec.NodeName] = append(perNode[pod.Spec.NodeName], p)
		checkNUMAAllocation(t, p, a, topo, 8, 2)
		for _, g := range a.GPUs {
			if other, dup := gpuOwner[g]; dup {
				t.Errorf("GPU %s given to both %s and %s", g, other, p)
			}
			gpuOwner[g] = p
		}
		cpus, _ := flextopo.ParseCPUList(a.CPUSet)
		for cpu := range cpus {
			key := fmt.Sprintf("%s/%d", pod.Spec.NodeName, cpu)
			if other, dup := cpuOwner[key]; dup {
				t.Errorf("CPU %s given to both %s and %s", key, other, p)
			}
			cpuOwner[key] = p
		}
	}
	for n, ps := range perNode {
		sort.Strings(ps)
		t.Logf("node %s holds %v", n, ps)
	}
	if len(gpuOwner) != 8 {
		t.Errorf("%d distinct GPUs allocated, want 8", len(gpuOwner))
	}
}

// (c, GPUs only) The same without exclusive CPUs, so CPU accounting cannot
// keep the pods apart: four 1-GPU pods created together on a 4-GPU node
// must get four different GPUs.
func TestConcurrentSingleGPUPodsGetDistinctGPUs(t *testing.T) {
	c := requireExtender(t)
	s := newScenario(t, c, "distinct1")

	b := newTopo(s.nodeName("quad"))
	b.switchGPUs(b.numa(b.socket(), "0-15", 65536), 4)
	quad := s.addTopologyNode("quad", b.build())
	s.waitExtenderSees(quad)

	pods := []string{"g0", "g1", "g2", "g3"}
	for _, p := range pods {
		s.createPod(podSpec{name: p, gpus: 1, cpu: "100m", memory: "64Mi", affinity: "numa", mode: "guaranteed"})
	}
	owner := map[string]string{}
	for _, p := range pods {
		pod, a := s.waitScheduled(p)
		if pod.Spec.NodeName != quad {
			t.Fatalf("pod %s on %s, want %s", p, pod.Spec.NodeName, quad)
		}
		if len(a.GPUs) != 1 {
			t.Errorf("pod %s: allocation gpus %v, want one", p, a.GPUs)
		}
		for _, g := range a.GPUs {
			if other, dup := owner[g]; dup {
				t.Errorf("GPU %s given to both %s and %s", g, other, p)
			}
			owner[g] = p
		}
	}
}

// (d) A node with an invalid topology annotation does not disturb the rest:
// the extender keeps serving, pods schedule on the good node, and a
// topology-constrained pod that only the broken node could hold (by count)
// stays Pending.
func TestBrokenTopologyAnnotationIsIsolated(t *testing.T) {
	c := requireExtender(t)
	s := newScenario(t, c, "broken")

	// Created first, so the extender meets it before the good node.
	broken := s.addNode("bad-json", `{"version":1,"sockets":[{"id":0,"numaNodes":[{"id":0,"cpus":"0-31"`,
		32, 262144, 8, nil)

	gb := newTopo(s.nodeName("good"))
	gn := gb.numa(gb.socket(), "0-15", 65536)
	g := gb.switchGPUs(gn, 2)
	gb.nvlink(g[0], g[1], 4)
	good := s.addTopologyNode("good", gb.build())
	s.waitExtenderSees(good)

	s.createPod(podSpec{name: "pair", gpus: 2, cpu: "1", memory: "1Gi", affinity: "nvlink", mode: "guaranteed"})
	pod, a := s.waitScheduled("pair")
	if pod.Spec.NodeName != good {
		t.Errorf("pod pair landed on %s, want %s", pod.Spec.NodeName, good)
	}
	if a.Level != "nvlink" {
		t.Errorf("pod pair: allocation level %q, want nvlink", a.Level)
	}

	s.createPod(podSpec{name: "plain", cpu: "100m", memory: "64Mi"})
	plain := s.waitBound("plain", false)
	t.Logf("pod plain bound to %s", plain.Spec.NodeName)

	// 4 GPUs: only the broken node has that many by count.
	s.createPod(podSpec{name: "four", gpus: 4, cpu: "1", memory: "1Gi", affinity: "numa", mode: "guaranteed"})
	msg := s.waitUnschedulable("four")
	t.Logf("pod four stays Pending: %s", msg)
	if !strings.Contains(msg, broken) && !strings.Contains(strings.ToLower(msg), "topology") {
		cx := harness.Ctx(t, 10*time.Second)
		t.Errorf("pod four: the scheduling failure names neither node %s nor its topology: %q\nevents:\n%s",
			broken, msg, s.events(cx, "four"))
	}

	if err := c.Extender.CheckAlive(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(c.ExtenderURL + "/healthz")
	if err != nil {
		t.Fatalf("extender /healthz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("extender /healthz: HTTP %d %s", resp.StatusCode, body)
	}
}

func sameInts(a, b []int) bool {
	x := append([]int(nil), a...)
	y := append([]int(nil), b...)
	sort.Ints(x)
	sort.Ints(y)
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}
