package core

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestConcurrentCycles drives the C core the way kube-scheduler does, from
// several goroutines at once: informer events on other nodes all the while,
// Filter on every node in parallel, Rank, Assume, and the Binding (Bound,
// then the bound pod back through the informer) in a goroutine of its own
// while the next cycle filters. scripts/test.sh runs it under go test -race
// (the Go side) and once more with the C libraries built with
// ThreadSanitizer (the C side: FLEXTOPO_TSAN, CGO_CFLAGS=-fsanitize=thread).
//
// Whatever the interleaving, the outcome is fixed, round after round: the
// eight scheduled nodes' 32 GPUs go to 16 two-GPU pods, no GPU twice, a 17th
// pod finds no room on them, and once the 16 are deleted the next round
// places 16 again.
func TestConcurrentCycles(t *testing.T) {
	const (
		scheduled = 8 // nodes n0..n7, where the cycles place pods
		churned   = 4 // nodes m0..m3, where the informer adds and deletes pods
		workers   = 4 // kube-scheduler's parallel Filter
		rounds    = 20
	)
	e, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := 0; i < scheduled; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	for i := 0; i < churned; i++ {
		names = append(names, fmt.Sprintf("m%d", i))
	}
	for _, n := range names {
		if err := e.Apply(KindNode, node(n)); err != nil {
			t.Fatal(err)
		}
	}
	e.SetSynced(true)

	stop := make(chan struct{})
	var informer sync.WaitGroup
	informer.Add(1)
	go func() {
		defer informer.Done()
		churn(t, e, churned, stop)
	}()
	// Stopped however the test ends: a Fatalf below must not leave the
	// informer logging to a finished test.
	defer func() {
		close(stop)
		informer.Wait()
	}()

	for r := 0; r < rounds; r++ {
		placed := fill(t, e, r, names, scheduled, workers)
		if nodeName, _ := cycle(t, e, pod("extra", "uid-extra", "", "", 100, 2), names[:scheduled], names, workers); nodeName != "" {
			t.Fatalf("round %d: a two-GPU pod more than %d was placed on %s; its GPUs are all taken", r, len(placed), nodeName)
		}
		// The pods end, and the informer says so: the next round finds
		// every GPU free again.
		for _, raw := range placed {
			if err := e.Delete(KindPod, raw); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// fill places two-GPU pods on the scheduled nodes until every GPU is taken,
// checking that none is given twice, and returns the bound pods as the
// informer delivered them.
func fill(t *testing.T, e *Embed, round int, names []string, scheduled, workers int) [][]byte {
	t.Helper()
	pods := scheduled * 4 / 2
	var (
		binds  sync.WaitGroup
		mu     sync.Mutex
		placed [][]byte
	)
	taken := map[string]string{} // "node/GPU uuid" -> pod
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("p%d-%d", round, i)
		nodeName, ann := cycle(t, e, pod(name, "uid-"+name, "", "", 100, 2), names[:scheduled], names, workers)
		if nodeName == "" {
			t.Fatalf("round %d, pod %s: no node fits, with %d of %d pods placed", round, name, i, pods)
		}
		var a struct{ GPUs []string }
		if err := json.Unmarshal([]byte(ann), &a); err != nil || len(a.GPUs) != 2 {
			t.Fatalf("pod %s: allocation %q (%v), want two GPUs", name, ann, err)
		}
		for _, g := range a.GPUs {
			if other, dup := taken[nodeName+"/"+g]; dup {
				t.Fatalf("round %d: GPU %s of %s given to %s and to %s", round, g, nodeName, other, name)
			}
			taken[nodeName+"/"+g] = name
		}
		binds.Add(1)
		go func() {
			defer binds.Done()
			// The bound pod comes back through the informer.
			raw := pod(name, "uid-"+name, nodeName, ann, 100, 2)
			if err := e.Apply(KindPod, raw); err != nil {
				t.Errorf("pod %s from the informer: %v", name, err)
			}
			mu.Lock()
			placed = append(placed, raw)
			mu.Unlock()
		}()
	}
	binds.Wait()
	return placed
}

// cycle is one scheduling cycle of pod: Filter on all nodes from workers
// goroutines, Rank of the fitting ones, and Assume on the best of them among
// candidates, with the Binding's Bound in a goroutine. It returns the node
// and the allocation annotation, or "" when none fits.
func cycle(t *testing.T, e *Embed, raw []byte, candidates, all []string, workers int) (string, string) {
	t.Helper()
	p, err := e.NewPod(raw)
	if err != nil {
		t.Fatal(err)
	}
	fits := make([]bool, len(all))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(all); i += workers {
				f, _ := p.Filter(all[i], nil, 0)
				fits[i] = f == Fits
			}
		}(w)
	}
	wg.Wait()
	var feasible []string
	for i, n := range all[:len(candidates)] {
		if fits[i] {
			feasible = append(feasible, n)
		}
	}
	if len(feasible) == 0 {
		p.Free()
		return "", ""
	}
	ranks, err := p.Rank(feasible)
	if err != nil {
		t.Fatal(err)
	}
	best := 0
	for i := range ranks {
		if ranks[i] > ranks[best] {
			best = i
		}
	}
	ann, _, err := p.Assume(feasible[best])
	if err != nil {
		t.Fatalf("assume on %s: %v", feasible[best], err)
	}
	go func() {
		p.Bound(feasible[best], nil, time.Millisecond)
		p.Free()
	}()
	return feasible[best], ann
}

// churn adds and deletes one-GPU pods on nodes m0.. until stop, as an
// informer would deliver another scheduler's pods.
func churn(t *testing.T, e *Embed, nodes int, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		n, g := fmt.Sprintf("m%d", i%nodes), i%4
		a := fmt.Sprintf(`{"version":1,"node":%q,"level":"node","mode":"best-effort","gpus":["GPU-%d"],`+
			`"gpuIndexes":[%d],"mig":[],"cpuset":"","numaNodes":[],"memoryMiB":0}`, n, g, g)
		raw := pod(fmt.Sprintf("c%d", i), fmt.Sprintf("uid-c%d", i), n, a, 0, 1)
		if err := e.Apply(KindPod, raw); err != nil {
			t.Errorf("churn: %v", err)
			return
		}
		if err := e.Delete(KindPod, raw); err != nil {
			t.Errorf("churn: %v", err)
			return
		}
	}
}
