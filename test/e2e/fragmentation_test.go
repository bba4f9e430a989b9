package e2e

// Fragmentation-aware scoring (docs/scoring.md; include/flextopo/frag.h)
// against a real kube-scheduler: after a run of NVLink-pair pods, a 1-GPU
// pod takes the GPU whose peer is held rather than break a free pair
// (NVIDIA/k8s-device-plugin #1193), although the policy alone prefers the
// emptier node.
//
// The workload mix is process-wide: every GPU pod the extender sees placed
// counts. So the test runs its own extender (fragmentationWindow 8), its own
// kube-scheduler pointed at it, and does not call t.Parallel(): Go runs the
// sequential top-level tests before it releases the parallel ones, so no
// other test places pods meanwhile and the mix holds exactly what this test
// placed. A second extender with fragmentationWindow 0, asked only through
// /debug/explain, shows the same choice without the penalty.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"testing"
	"time"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const (
	// schedFGD is the kube-scheduler profile of the fragmentation test.
	schedFGD = "flextopo-fgd"
	// labelPool marks the test's nodes the 1-GPU pod may use.
	labelPool = "e2e.flextopo.io/pool"

	fgdWindow = 8
)

// debugNodes is the part of GET /debug/nodes the test reads.
type debugNodes struct {
	WorkloadMix struct {
		Window  int `json:"window"`
		Pods    int `json:"pods"`
		Classes []struct {
			Demand struct {
				GPUs         int     `json:"gpus"`
				Affinity     *string `json:"affinity"`
				AffinityMode string  `json:"affinityMode"`
				NodeRules    *struct {
					Requirements int `json:"requirements"`
					Tolerations  int `json:"tolerations"`
				} `json:"nodeRules"`
			} `json:"demand"`
			Pods int `json:"pods"`
		} `json:"classes"`
	} `json:"workloadMix"`
	Nodes []struct {
		Name string `json:"name"`
		GPUs struct {
			Used int `json:"used"`
		} `json:"gpus"`
	} `json:"nodes"`
}

// mixCounts names each class of the mix "<gpus>/<affinity>/<mode>" with its
// pods.
func (d *debugNodes) mixCounts() map[string]int {
	out := map[string]int{}
	for _, c := range d.WorkloadMix.Classes {
		aff := "none"
		if c.Demand.Affinity != nil {
			aff = *c.Demand.Affinity
		}
		out[fmt.Sprintf("%d/%s/%s", c.Demand.GPUs, aff, c.Demand.AffinityMode)] += c.Pods
	}
	return out
}

// explainNode is one node of POST /debug/explain.
type explainNode struct {
	Node          string `json:"node"`
	Verdict       string `json:"verdict"`
	Score         int    `json:"score"`
	Rank          *int64 `json:"rank"`
	Fragmentation *struct {
		DeltaGPUs float64 `json:"deltaGpus"`
	} `json:"fragmentation"`
	Placement *struct {
		GPUs []int `json:"gpus"`
	} `json:"placement"`
}

// debugPod is the part of GET /debug/pods/{namespace}/{name} the test reads.
type debugPod struct {
	Decisions []struct {
		Verb  string `json:"verb"`
		Nodes []struct {
			Node  string `json:"node"`
			Score *int   `json:"score"`
		} `json:"nodes"`
	} `json:"decisions"`
}

// debugCall sends body (when not nil) as JSON to the extender's debug API and
// decodes the 200 reply into out.
func debugCall(e *harness.TestExtender, method, path string, body, out interface{}) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.DebugURL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := harness.HTTPClient(nil).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s %s: HTTP %d: %s", e.Name, method, path, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s %s: %v: %s", e.Name, method, path, err, raw)
	}
	return nil
}

// waitNodes polls /debug/nodes until ok accepts it, failing the test after
// 15 s with what, and returns the last reply.
func waitNodes(t *testing.T, e *harness.TestExtender, what string, ok func(*debugNodes) bool) *debugNodes {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var d debugNodes
		err := debugCall(e, http.MethodGet, "/debug/nodes", nil, &d)
		if err == nil && ok(&d) {
			return &d
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not seen within 15s (last reply %+v, error %v)", e.Name, what, d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitGPUsUsed waits until the extender has every node of used with that
// many GPUs held: its watch has delivered the nodes and the pods on them.
func waitGPUsUsed(t *testing.T, e *harness.TestExtender, used map[string]int) {
	t.Helper()
	waitNodes(t, e, fmt.Sprintf("GPUs used %v", used), func(d *debugNodes) bool {
		seen := 0
		for _, n := range d.Nodes {
			if want, ok := used[n.Name]; ok {
				if n.GPUs.Used != want {
					return false
				}
				seen++
			}
		}
		return seen == len(used)
	})
}

// explain asks the extender e's /debug/explain about pod on each of nodes.
func explain(t *testing.T, e *harness.TestExtender, s *scenario, pod podSpec, nodes ...string) map[string]explainNode {
	t.Helper()
	var reply struct {
		Nodes []explainNode `json:"nodes"`
	}
	if err := debugCall(e, http.MethodPost, "/debug/explain", s.podObject(pod), &reply); err != nil {
		t.Fatal(err)
	}
	out := map[string]explainNode{}
	for _, n := range reply.Nodes {
		out[n.Node] = n
	}
	for _, n := range nodes {
		en, ok := out[n]
		if !ok {
			t.Fatalf("%s /debug/explain: no entry for node %s", e.Name, n)
		}
		t.Logf("%s explains %s on %s: verdict %s, score %d, fragmentation %+v, placement %+v",
			e.Name, pod.name, n, en.Verdict, en.Score, en.Fragmentation, en.Placement)
	}
	return out
}

// pairNodeTopo is a node of GPUs linked in NVLink pairs (0-1, 2-3, ...)
// and nothing else, one PCIe switch per four GPUs.
func pairNodeTopo(node string, gpus int) *flextopo.Topology {
	b := newTopo(node)
	n := b.numa(b.socket(), "0-31", 262144)
	for i := 0; i < gpus; i += 4 {
		g := b.switchGPUs(n, 4)
		b.nvlink(g[0], g[1], 4)
		b.nvlink(g[2], g[3], 4)
	}
	return b.build()
}

// nvswitchNodeTopo is an 8x A100 NVSwitch box: every pair of GPUs linked.
func nvswitchNodeTopo(node string) *flextopo.Topology {
	b := newTopo(node).gpuModel(a100Model, a100MemMiB)
	n := b.numa(b.socket(), "0-63", 524288)
	g := append(b.switchGPUs(n, 4), b.switchGPUs(n, 4)...)
	for i := range g {
		for j := i + 1; j < len(g); j++ {
			b.nvlink(g[i], g[j], 12)
		}
	}
	return b.build()
}

// TestFragmentationSparesLastFreeNVLinkPair: once the recent pods are all
// NVLink pairs, a 1-GPU pod goes to the node whose one free GPU has its peer
// held, not to the emptier node where it would break a free pair.
//
//	pairs-8   8 GPUs, NVLink pairs 0-1 2-3 4-5 6-7, GPUs 6 and 7 held:
//	          three free pairs                       pool "single"
//	pairs-4   4 GPUs, NVLink pairs 0-1 2-3, GPUs 1-3 held: GPU 0 free,
//	          its peer held                           pool "single"
//	a100-0/1  8x A100 NVSwitch each, where the pair pods go
//
// The pair pods may run on any of the test's nodes: a pair they could use is
// worth keeping only if they could use it (flextopo weighs their
// nodeSelector and tolerations, include/flextopo/noderules.h). pairs-8 and
// pairs-4 are cordoned while the pair pods are scheduled, so that
// kube-scheduler sends them to the A100s, and uncordoned before the 1-GPU
// pod, which only they may take.
//
// pairs-8 and pairs-4 have the same CPUs and memory and one held pod each
// of the same size, so kube-scheduler's own scores tie and the extender's
// decide. Under policy distributed the extender alone prefers pairs-8
// (emptier); the 8 pair pods make its 1-GPU placement there raise the
// node's fragmentation by a GPU (the broken pair's other GPU), while on
// pairs-4 it lowers it by a GPU, which ranks pairs-4 first: of the two
// nodes explained it scores 10, pairs-8 0. (The pair pods' nodeSelector
// admits both candidates, so it does not bind their class: ft_mix_weigh.)
func TestFragmentationSparesLastFreeNVLinkPair(t *testing.T) {
	c := requireExtender(t)
	// No t.Parallel(): see the top of the file.
	s := newScenario(t, c, "fgd")

	ext := c.StartTestExtender(t, "flextopo-extender-fgd",
		map[string]interface{}{"policy": policyDistributed, "fragmentationWindow": fgdWindow})
	control := c.StartTestExtender(t, "flextopo-extender-nofgd",
		map[string]interface{}{"policy": policyDistributed, "fragmentationWindow": 0})
	sched, err := c.StartExtraScheduler("kube-scheduler-fgd", schedFGD, func(cfg map[string]interface{}) error {
		exts, _ := cfg["extenders"].([]interface{})
		ext0, _ := exts[0].(map[string]interface{})
		ext0["urlPrefix"] = ext.URL
		return nil
	})
	if sched != nil {
		t.Cleanup(func() { sched.Stop(15 * time.Second) })
	}
	if err != nil {
		t.Fatalf("kube-scheduler for %s: %v", schedFGD, err)
	}

	single := map[string]string{labelPool: "single"}
	pairs := map[string]string{labelPool: "pairs"}
	big := s.addLabelledTopologyNode("pairs-8", pairNodeTopo(s.nodeName("pairs-8"), 8), single)
	small := s.addLabelledTopologyNode("pairs-4", pairNodeTopo(s.nodeName("pairs-4"), 4), single)
	c0 := s.addLabelledTopologyNode("a100-0", nvswitchNodeTopo(s.nodeName("a100-0")), pairs)
	c1 := s.addLabelledTopologyNode("a100-1", nvswitchNodeTopo(s.nodeName("a100-1")), pairs)
	s.setUnschedulable(big, true)
	s.setUnschedulable(small, true)
	s.createHeldPods(big, "", []heldPod{{name: "holder-8", gpus: []int{6, 7}}})
	s.createHeldPods(small, "", []heldPod{{name: "holder-4", gpus: []int{1, 2, 3}}})
	// The holders enter the mix when the extender first sees them on a
	// node; the pair pods must come after them to push them out.
	used := map[string]int{big: 2, small: 3, c0: 0, c1: 0}
	waitGPUsUsed(t, ext, used)
	waitGPUsUsed(t, control, used)

	// Fill the window with NVLink-pair pods, one at a time, through the
	// test's own scheduler and extender; the test's nodes are theirs.
	for i := 0; i < fgdWindow; i++ {
		name := fmt.Sprintf("pair-%d", i)
		s.createPod(podSpec{name: name, gpus: 2, cpu: "100m", memory: "64Mi", affinity: "nvlink", mode: "guaranteed",
			schedulerName: schedFGD})
		pod, a := s.waitScheduled(name)
		if pod.Spec.NodeName != c0 && pod.Spec.NodeName != c1 {
			t.Fatalf("pod %s on %s, want %s or %s", name, pod.Spec.NodeName, c0, c1)
		}
		if a.Level != "nvlink" || len(a.GPUs) != 2 {
			t.Errorf("pod %s: allocation level %q gpus %v, want two GPUs at level nvlink", name, a.Level, a.GPUs)
		}
	}
	pairClass := "2/nvlink/guaranteed"
	d := waitNodes(t, ext, fmt.Sprintf("a mix of %d %s pods", fgdWindow, pairClass), func(d *debugNodes) bool {
		m := d.mixCounts()
		return d.WorkloadMix.Pods == fgdWindow && len(m) == 1 && m[pairClass] == fgdWindow
	})
	if d.WorkloadMix.Window != fgdWindow {
		t.Errorf("%s: workloadMix.window %d, want %d", ext.Name, d.WorkloadMix.Window, fgdWindow)
	}
	if r := d.WorkloadMix.Classes[0].Demand.NodeRules; r == nil || r.Requirements != 1 {
		t.Errorf("%s: the pair pods' class has nodeRules %+v, want their one nodeSelector requirement", ext.Name, r)
	}
	// small first: a scheduler's informer delivers node updates in order,
	// so whenever it has seen big open it has seen small open too, and the
	// pod below cannot land on big for want of small.
	s.setUnschedulable(small, false)
	s.setUnschedulable(big, false)

	// What each extender would do with the 1-GPU pod.
	pod := podSpec{name: "one-gpu", gpus: 1, cpu: "100m", memory: "64Mi",
		annotations:   map[string]string{flextopo.AnnPolicy: policyDistributed},
		schedulerName: schedFGD, nodeSelector: map[string]string{labelTest: s.id, labelPool: "single"}}
	plain := explain(t, control, s, pod, big, small)
	if plain[big].Score <= plain[small].Score {
		t.Errorf("%s (no fragmentation scoring) scores %s %d and %s %d, want %s above: the test would prove nothing",
			control.Name, big, plain[big].Score, small, plain[small].Score, big)
	}
	for _, n := range []string{big, small} {
		if plain[n].Fragmentation != nil {
			t.Errorf("%s: node %s has fragmentation %+v with fragmentationWindow 0, want none", control.Name, n, plain[n].Fragmentation)
		}
	}
	fgd := explain(t, ext, s, pod, big, small)
	want := map[string]struct {
		delta float64
		score int
	}{big: {1, 0}, small: {-1, 10}}
	for n, w := range want {
		e := fgd[n]
		switch {
		case e.Verdict != "fit":
			t.Errorf("%s: node %s verdict %q, want fit", ext.Name, n, e.Verdict)
		case e.Fragmentation == nil || e.Rank == nil:
			t.Errorf("%s: node %s has no fragmentation entry or rank", ext.Name, n)
		case math.Abs(e.Fragmentation.DeltaGPUs-w.delta) > 1e-9:
			t.Errorf("%s: node %s fragmentation deltaGpus %g, want %g",
				ext.Name, n, e.Fragmentation.DeltaGPUs, w.delta)
		}
		if e.Score != w.score {
			t.Errorf("%s: node %s score %d, want %d", ext.Name, n, e.Score, w.score)
		}
	}
	if fgd[small].Score <= fgd[big].Score {
		t.Errorf("%s scores %s %d and %s %d, want %s above", ext.Name, small, fgd[small].Score, big, fgd[big].Score, small)
	}
	if p := fgd[small].Placement; p == nil || !sameInts(p.GPUs, []int{0}) {
		t.Errorf("%s: placement on %s %+v, want GPU 0", ext.Name, small, p)
	}

	s.createPod(pod)
	placed, a := s.waitScheduled(pod.name)
	if placed.Spec.NodeName != small {
		t.Errorf("pod %s on %s, want %s: it broke a free NVLink pair", pod.name, placed.Spec.NodeName, small)
	} else if !sameSet(a.GPUs, []string{flextopo.GPUUUID(small, 0)}) {
		t.Errorf("pod %s: allocation gpus %v, want %s", pod.name, a.GPUs, flextopo.GPUUUID(small, 0))
	}

	// The scores kube-scheduler was given are the ones explained.
	var dp debugPod
	if err := debugCall(ext, http.MethodGet, "/debug/pods/"+s.ns+"/"+pod.name, nil, &dp); err != nil {
		t.Fatal(err)
	}
	scored := map[string]int{}
	for _, dec := range dp.Decisions {
		for _, row := range dec.Nodes {
			if dec.Verb == "prioritize" && row.Score != nil {
				scored[row.Node] = *row.Score
			}
		}
	}
	for _, n := range []string{big, small} {
		if got, ok := scored[n]; !ok || got != fgd[n].Score {
			t.Errorf("%s: prioritize gave node %s %d (recorded: %v), want %d as explained", ext.Name, n, got, ok, fgd[n].Score)
		}
	}

	// The window slides: the oldest pair pod leaves, the 1-GPU pod enters.
	singleClass := "1/none/guaranteed"
	waitNodes(t, ext, "the 1-GPU pod in the mix", func(d *debugNodes) bool {
		m := d.mixCounts()
		return d.WorkloadMix.Pods == fgdWindow && len(m) == 2 && m[pairClass] == fgdWindow-1 && m[singleClass] == 1
	})
}
