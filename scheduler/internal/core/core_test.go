package core

import (
	"encoding/json"
	"strings"
	"testing"
)

// The cgo glue on a real state: a 4-GPU node with two NVLink pairs, fed as
// JSON, a pod's cycle through filter, rank, assume and victims. What each
// answer means is tested in C (test/unit/test_embed.c); here, that lists,
// strings and errors cross the boundary whole.

const topology = `{"version":1,"sockets":[{"id":0,"numaNodes":[` +
	`{"id":0,"cpus":"0-7","memoryMiB":65536,"pcieSwitches":[{"id":0,"gpus":[` +
	`{"index":0,"uuid":"GPU-0","model":"NVIDIA A100-SXM4-80GB","memoryMiB":81920,"nvlinks":[{"peer":1,"links":4}]},` +
	`{"index":1,"uuid":"GPU-1","model":"NVIDIA A100-SXM4-80GB","memoryMiB":81920,"nvlinks":[{"peer":0,"links":4}]}]}],"gpus":[]},` +
	`{"id":1,"cpus":"8-15","memoryMiB":65536,"pcieSwitches":[{"id":1,"gpus":[` +
	`{"index":2,"uuid":"GPU-2","model":"NVIDIA A100-SXM4-80GB","memoryMiB":81920,"nvlinks":[{"peer":3,"links":4}]},` +
	`{"index":3,"uuid":"GPU-3","model":"NVIDIA A100-SXM4-80GB","memoryMiB":81920,"nvlinks":[{"peer":2,"links":4}]}]}],"gpus":[]}]}]}`

func node(name string) []byte {
	b, _ := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"name": name, "annotations": map[string]string{"flextopo.io/topology": topology}},
		"status": map[string]interface{}{"allocatable": map[string]string{
			"cpu": "16", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "4"}},
	})
	return b
}

func pod(name, uid, nodeName, allocation string, priority, gpus int) []byte {
	ann := map[string]string{"flextopo.io/affinity": "nvlink"}
	if allocation != "" {
		ann["flextopo.io/allocation"] = allocation
	}
	q := map[string]string{"nvidia.com/gpu": string(rune('0' + gpus))}
	b, _ := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"name": name, "namespace": "t", "uid": uid, "annotations": ann},
		"spec": map[string]interface{}{"nodeName": nodeName, "priority": priority,
			"containers": []interface{}{map[string]interface{}{"name": "c",
				"resources": map[string]interface{}{"requests": q, "limits": q}}}},
		"status": map[string]interface{}{"phase": "Running"},
	})
	return b
}

func held(uid, gpu string, index int) []byte {
	a := `{"version":1,"node":"n1","level":"node","mode":"best-effort","gpus":["` + gpu +
		`"],"gpuIndexes":[` + string(rune('0'+index)) + `],"mig":[],"cpuset":"","numaNodes":[],"memoryMiB":0}`
	return pod(uid, uid, "n1", a, 0, 1)
}

func newEmbed(t *testing.T) *Embed {
	t.Helper()
	e, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{node("n1"), node("n2"), held("low-0", "GPU-0", 0), held("low-2", "GPU-2", 2)} {
		kind := KindPod
		if strings.Contains(string(b), "topology") {
			kind = KindNode
		}
		if err := e.Apply(kind, b); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func TestCycle(t *testing.T) {
	e := newEmbed(t)
	if _, err := e.NewPod(pod("p", "uid-p", "", "", 0, 2)); err == nil || !strings.Contains(err.Error(), "not in sync") {
		t.Fatalf("before sync: %v, want a refusal naming the sync", err)
	}
	e.SetSynced(true)
	p, err := e.NewPod(pod("p", "uid-p", "", "", 1000, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	if !p.WantsTopology() {
		t.Fatal("a pod with an affinity wants topology")
	}
	if fit, reason := p.Filter("n1", nil, 0); fit != Unfit || !strings.Contains(reason, "nvlink") {
		t.Errorf("n1: %v %q, want Unfit with flextopo's reason", fit, reason)
	}
	if fit, _ := p.Filter("n1", RemovedList([]string{"low-0"}), 1); fit != Fits {
		t.Errorf("n1 without low-0: %v, want Fits", fit)
	}
	if fit, _ := p.Filter("n2", nil, 0); fit != Fits {
		t.Errorf("n2: %v, want Fits", fit)
	}
	ranks, err := p.Rank([]string{"n1", "n2", "nowhere"})
	if err != nil || len(ranks) != 3 || ranks[1] == RankNone || ranks[2] != RankNone {
		t.Errorf("ranks %v (%v), want n2 ranked and nowhere RankNone", ranks, err)
	}
	// Linear between the cycle's lowest rank (0) and its highest (100).
	if got := ScoresOfRanks([]int64{RankNone, 5, 10, 15}, 100); got[0] != 0 || got[1] != 0 || got[2] != 50 || got[3] != 100 {
		t.Errorf("scores %v", got)
	}
	v, err := p.Victims("n1", []string{"low-0", "low-2"}, 0)
	if err != nil || v.Outcome != Chosen || len(v.UIDs) != 1 || (v.UIDs[0] != "low-0" && v.UIDs[0] != "low-2") {
		t.Errorf("victims %+v (%v), want one of the two holders", v, err)
	}
	p.PreemptDone()
	ann, dra, err := p.Assume("n2")
	if err != nil || dra || !strings.Contains(ann, `"node":"n2"`) || !strings.Contains(ann, `"level":"nvlink"`) {
		t.Errorf("assume: %q dra=%v err=%v", ann, dra, err)
	}
	if _, _, err := p.Assume("nowhere"); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("assume on an unknown node: %v", err)
	}
	p.Bound("n2", nil, 0)
	p.Free()
	if fit, reason := p.Filter("n2", nil, 0); fit != UnfitUnresolvable || reason != errFreed.Error() {
		t.Errorf("after Free: %v %q", fit, reason)
	}
}

func TestBadInput(t *testing.T) {
	e := newEmbed(t)
	e.SetSynced(true)
	var ce *Error
	if err := e.Apply(KindNode, []byte("{")); err == nil {
		t.Error("bad JSON applied")
	} else if ce, _ = err.(*Error); ce == nil || ce.Code >= 0 {
		t.Errorf("error %T %v, want *Error with a negative code", err, err)
	}
	if _, err := e.NewPod([]byte(`{"metadata":{"name":"x","namespace":"t","uid":"u",` +
		`"annotations":{"flextopo.io/affinity":"bogus"}},"spec":{"containers":[]}}`)); err == nil ||
		!strings.Contains(err.Error(), "flextopo.io/affinity") {
		t.Errorf("bad affinity: %v, want a message naming the annotation", err)
	}
	if _, err := New("/nonexistent/flextopo.yaml"); err == nil {
		t.Error("a missing configuration file was accepted")
	}
}

// member is a pod holding GPU `index` of node on, in coscheduling gang
// "train" when inGang (the label without a PodGroup: all or nothing).
func member(uid, on string, index, priority int, inGang bool) []byte {
	a := `{"version":1,"node":"` + on + `","level":"node","mode":"best-effort","gpus":["GPU-` +
		string(rune('0'+index)) + `"],"gpuIndexes":[` + string(rune('0'+index)) +
		`],"mig":[],"cpuset":"","numaNodes":[],"memoryMiB":0}`
	var p map[string]interface{}
	_ = json.Unmarshal(pod(uid, uid, on, a, priority, 1), &p)
	if inGang {
		p["metadata"].(map[string]interface{})["labels"] = map[string]string{"scheduling.x-k8s.io/pod-group": "train"}
	}
	b, _ := json.Marshal(p)
	return b
}

// A victim's gang crosses the boundary: the cost counts the gang's member
// on the other node, says the set breaks a gang, and compares as in C.
func TestGangCosts(t *testing.T) {
	e, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	objs := []struct {
		kind Kind
		b    []byte
	}{
		{KindNode, node("n1")}, {KindNode, node("n2")},
		{KindPod, member("train-0", "n1", 0, 0, true)}, {KindPod, member("solo", "n1", 2, 0, false)},
		{KindPod, member("train-1", "n2", 0, 0, true)}, {KindPod, member("serving-2", "n2", 2, 5000, false)},
		{KindPod, member("serving-3", "n2", 3, 5000, false)},
	}
	for _, o := range objs {
		if err := e.Apply(o.kind, o.b); err != nil {
			t.Fatal(err)
		}
	}
	e.SetSynced(true)
	p, err := e.NewPod(pod("p", "uid-p", "", "", 1000, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	v1, err := p.Victims("n1", nil, 0)
	if err != nil || v1.Outcome != Chosen || len(v1.UIDs) != 1 || v1.UIDs[0] != "solo" || v1.BreaksGangs || v1.Cost.Disrupted() != 1 {
		t.Errorf("n1: %+v (%v), want solo alone: train-0 costs its gang", v1, err)
	}
	v2, err := p.Victims("n2", nil, 0)
	if err != nil || v2.Outcome != Chosen || len(v2.UIDs) != 1 || v2.UIDs[0] != "train-1" || !v2.BreaksGangs || v2.Cost.Disrupted() != 2 {
		t.Errorf("n2: %+v (%v), want train-1 with its gang: 2 pods disrupted", v2, err)
	}
	if v1.Cost.Compare(v2.Cost) >= 0 || v2.Cost.Compare(v1.Cost) <= 0 || v1.Cost.Compare(v1.Cost) != 0 {
		t.Errorf("compare: n1 %d, n2 %d, want n1 cheaper", v1.Cost.Compare(v2.Cost), v2.Cost.Compare(v1.Cost))
	}
}
