package flextopo

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"flextopo.dev/scheduler/internal/core"
)

// Preemption runs through kube-scheduler's own preemption evaluator
// (pkg/scheduler/framework/preemption): candidate nodes, PodDisruptionBudgets,
// the choice of one node, eviction and the nominated node are its. Only
// the victims on each candidate node are flextopo's, as they are in
// extender mode:
//
//  1. DefaultPreemption's SelectVictimsOnNode proposes victims, filtering
//     with every Filter plugin, this one included (PreFilterExtensions
//     tells Filter which pods the dry run removed);
//  2. flextopo's victim search replaces them by its cheapest set plus the
//     proposed victims that hold nothing it models
//     (ft_app_preempt_decide, the extender's preempt verb), or keeps them
//     where it cannot judge, or drops the node;
//  3. unlike an extender's reply, which kube-scheduler trusts, the set is
//     checked against every Filter plugin on the node without those pods;
//     a set they refuse gives way to the proposed one;
//  4. where a chosen set breaks a gang, the evaluator picks its node by
//     flextopo's cost of each node's victims, every member of a broken gang
//     counted (OrderedScoreFuncs), as the extender's preempt verb answers
//     only the nodes of the least cost; otherwise by its own ranking.
//
// The plugin replaces DefaultPreemption in the profile (PostFilter and its
// PreEnqueue, which waits for preemptions in flight).
type preempt struct {
	dp        *defaultpreemption.DefaultPreemption
	evaluator *preemption.Evaluator
	search    *victimSearch
}

func (p *preempt) init(ctx context.Context, pl *Plugin) error {
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	dp, err := defaultpreemption.New(ctx, pl.args.preemptionArgs(), pl.h, fts)
	if err != nil {
		return err
	}
	p.dp = dp
	p.search = &victimSearch{DefaultPreemption: dp, pl: pl}
	p.evaluator = preemption.NewEvaluator(Name, pl.h, p.search, dp.Executor)
	return nil
}

// PostFilter tries preemption for a pod no node fits.
func (pl *Plugin) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	pl.search.forget()
	result, status := pl.evaluator.Preempt(ctx, state, pod, m)
	if c := cycleOf(state); c != nil {
		c.pod.PreemptDone()
		c.pod.Free()
		if !c.scoreOnly {
			// Only a pod flextopo may have refused waits for room in
			// the model (waiting.go).
			wait(pl.h, pod)
		}
	}
	if msg := status.Message(); msg != "" {
		return result, fwk.NewStatus(status.Code(), "preemption: "+msg)
	}
	return result, status
}

// PreEnqueue holds back a pod whose preemption is still evicting
// (DefaultPreemption's, on this plugin's executor).
func (pl *Plugin) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	return pl.dp.PreEnqueue(ctx, pod)
}

// victimSearch is DefaultPreemption with flextopo's victims.
type victimSearch struct {
	*defaultpreemption.DefaultPreemption
	pl *Plugin

	// The cost of the victims chosen on each candidate node of the
	// preemption in progress (one PostFilter at a time; its nodes are
	// searched in parallel).
	mu    sync.Mutex
	costs map[string]core.Victims
}

// forget starts a preemption: no node has costed victims yet.
func (v *victimSearch) forget() {
	v.mu.Lock()
	v.costs = map[string]core.Victims{}
	v.mu.Unlock()
}

func (v *victimSearch) remember(node string, choice core.Victims) {
	v.mu.Lock()
	if v.costs != nil {
		v.costs[node] = choice
	}
	v.mu.Unlock()
}

// OrderedScoreFuncs ranks the candidate nodes for the evaluator's pick
// (pickOneNodeForPreemption). Where no chosen set breaks a gang it returns
// nil: kube-scheduler's own ranking of the victims, which then agrees with
// flextopo's. Otherwise the nodes whose victims flextopo chose rank by their
// cost over every disrupted pod (the C core's order, core.Cost.Compare),
// cheapest first, and nodes with the scheduler's own victims last: their
// gangs were not costed.
func (v *victimSearch) OrderedScoreFuncs(_ context.Context, nodesToVictims map[string]*extenderv1.Victims) []func(string) int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	breaks := false
	for node := range nodesToVictims {
		breaks = breaks || v.costs[node].BreaksGangs
	}
	if !breaks {
		return nil
	}
	rank := make(map[string]int64, len(nodesToVictims))
	for node := range nodesToVictims {
		c, ok := v.costs[node]
		if !ok {
			rank[node] = int64(len(nodesToVictims))
			continue
		}
		for other := range nodesToVictims {
			if o, ok := v.costs[other]; ok && o.Cost.Compare(c.Cost) < 0 {
				rank[node]++
			}
		}
	}
	return []func(string) int64{func(node string) int64 { return -rank[node] }}
}

// SelectVictimsOnNode: see preempt above. `state` and `nodeInfo` are the
// evaluator's copies for this node.
func (v *victimSearch) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, pod *v1.Pod,
	nodeInfo fwk.NodeInfo, pdbs []*policy.PodDisruptionBudget) ([]*v1.Pod, int, *fwk.Status) {
	proposed, proposedPDB, status := v.DefaultPreemption.SelectVictimsOnNode(ctx, state, pod, nodeInfo, pdbs)
	c := cycleOf(state)
	if c == nil || !status.IsSuccess() {
		return proposed, proposedPDB, status
	}
	node := nodeInfo.Node().Name
	uids := make([]string, len(proposed))
	for i, p := range proposed {
		uids[i] = string(p.UID)
	}
	choice, err := c.pod.Victims(node, uids, proposedPDB)
	if err != nil {
		return nil, 0, fwk.AsStatus(err)
	}
	switch choice.Outcome {
	case core.Dropped:
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "flextopo: no set of lower-priority pods frees a placement here")
	case core.Proposed:
		return proposed, proposedPDB, status
	}
	if stale := v.unknownVictims(nodeInfo, proposed, choice.UIDs); stale != "" {
		// A victim the scheduler's cache no longer has: the model is
		// behind it (a deletion not applied yet). Evicting the
		// proposed set instead would evict one pod too many.
		return nil, 0, fwk.NewStatus(fwk.Unschedulable, "flextopo: the model still holds pod "+stale+", gone from the scheduler's cache; trying again once it is applied")
	}
	chosen, ok := v.checked(ctx, state, pod, nodeInfo, proposed, choice.UIDs)
	if !ok {
		klog.FromContext(ctx).V(2).Info("flextopo: victims refused by the other filters; the scheduler's are kept", "pod", klog.KObj(pod), "node", node)
		return proposed, proposedPDB, status
	}
	v.remember(node, choice)
	return chosen, choice.PDBViolations, status
}

// unknownVictims is a chosen uid that is neither on the node in the
// scheduler's view nor among the proposed victims (which the dry run took
// off it), or "".
func (v *victimSearch) unknownVictims(nodeInfo fwk.NodeInfo, proposed []*v1.Pod, uids []string) string {
	known := map[string]bool{}
	for _, pi := range nodeInfo.GetPods() {
		known[string(pi.GetPod().UID)] = true
	}
	for _, p := range proposed {
		known[string(p.UID)] = true
	}
	for _, uid := range uids {
		if !known[uid] {
			return uid
		}
	}
	return ""
}

// checked turns the chosen uids into pods and makes `nodeInfo` and `state`
// hold the node without them (the proposed victims back, the chosen ones
// gone), then runs every Filter plugin: false when one refuses. Every uid
// is known (unknownVictims).
func (v *victimSearch) checked(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo,
	proposed []*v1.Pod, uids []string) ([]*v1.Pod, bool) {
	logger := klog.FromContext(ctx)
	h := v.pl.h
	onNode := map[string]fwk.PodInfo{}
	for _, pi := range nodeInfo.GetPods() {
		onNode[string(pi.GetPod().UID)] = pi
	}
	wanted := map[string]bool{}
	chosen := make([]*v1.Pod, 0, len(uids))
	for _, uid := range uids {
		wanted[uid] = true
	}
	for _, p := range proposed {
		if !wanted[string(p.UID)] {
			pi, err := framework.NewPodInfo(p)
			if err != nil {
				return nil, false
			}
			nodeInfo.AddPodInfo(pi)
			if !h.RunPreFilterExtensionAddPod(ctx, state, pod, pi, nodeInfo).IsSuccess() {
				return nil, false
			}
		}
	}
	for _, uid := range uids {
		if pi, on := onNode[uid]; on {
			if err := nodeInfo.RemovePod(logger, pi.GetPod()); err != nil {
				return nil, false
			}
			if !h.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, nodeInfo).IsSuccess() {
				return nil, false
			}
			chosen = append(chosen, pi.GetPod())
			continue
		}
		for _, p := range proposed {
			if string(p.UID) == uid {
				chosen = append(chosen, p)
			}
		}
	}
	return chosen, h.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodeInfo).IsSuccess()
}
