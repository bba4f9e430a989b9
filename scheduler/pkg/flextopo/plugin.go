// Package flextopo is flextopo as kube-scheduler framework plugins: the
// same C core as the HTTP extender (include/flextopo/embed.h), asked at
// the framework's extension points instead of over HTTP. No placement,
// scoring or victim search is written here; see README.md in this module
// for the mapping and the configuration.
package flextopo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"flextopo.dev/scheduler/internal/core"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "FlexTopo"

const stateKey fwk.StateKey = Name

// Plugin implements PreFilter (with the preemption dry run's
// PreFilterExtensions), Filter, PreScore, Score (with NormalizeScore),
// Reserve, Bind, PostFilter and PreEnqueue.
type Plugin struct {
	h      fwk.Handle
	embed  *core.Embed
	args   *Args
	annKey string
	preempt
}

var (
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.PreScorePlugin    = &Plugin{}
	_ fwk.ScorePlugin       = &Plugin{}
	_ fwk.ReservePlugin     = &Plugin{}
	_ fwk.BindPlugin        = &Plugin{}
	_ fwk.PostFilterPlugin  = &Plugin{}
	_ fwk.PreEnqueuePlugin  = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
)

// The process has one model, whatever the number of profiles that enable
// the plugin: two models would each count only the pods its own profile
// assumed.
var shared struct {
	sync.Mutex
	embed      *core.Embed
	configFile string
}

func sharedEmbed(ctx context.Context, h fwk.Handle, configFile string) (*core.Embed, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.embed != nil {
		if configFile != shared.configFile {
			return nil, fmt.Errorf("%s: every profile must name the same configFile (%q, not %q)", Name, shared.configFile, configFile)
		}
		return shared.embed, nil
	}
	embed, err := core.New(configFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if err := feed(ctx, h, embed); err != nil {
		return nil, fmt.Errorf("%s: informers: %w", Name, err)
	}
	if err := embed.Serve(); err != nil {
		return nil, fmt.Errorf("%s: listeners: %w", Name, err)
	}
	shared.embed, shared.configFile = embed, configFile
	return embed, nil
}

// New is the plugin's factory (app.WithPlugin(Name, New)).
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	embed, err := sharedEmbed(ctx, h, args.ConfigFile)
	if err != nil {
		return nil, err
	}
	pl := &Plugin{h: h, embed: embed, args: args, annKey: embed.AnnotationPrefix() + "/allocation"}
	if err := pl.preempt.init(ctx, pl); err != nil {
		return nil, err
	}
	return pl, nil
}

// Name returns the plugin's name.
func (pl *Plugin) Name() string { return Name }

// cycle is the plugin's state of one scheduling cycle.
type cycle struct {
	pod        *core.Pod
	scoreOnly  bool             // no topology demand: ranked and assumed, never filtered
	removed    []string         // uids the preemption dry run took off the node
	ranks      map[string]int64 // PreScore's, by node
	annotation string           // Reserve's allocation annotation
	draAtBind  bool             // DRA chooses the devices; assumed at Bind
}

// Clone shares the pod handle (its methods are safe from any goroutine)
// and copies the dry run's removals, which each copy makes its own.
func (c *cycle) Clone() fwk.StateData {
	out := *c
	out.removed = append([]string(nil), c.removed...)
	return &out
}

func cycleOf(state fwk.CycleState) *cycle {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	c, _ := d.(*cycle)
	return c
}

// PreFilter decodes the pod's demand once. A pod asking flextopo nothing
// (no devices, pinned CPUs, affinity or capabilities) skips Filter, where
// the model has nothing to refuse it, but is still ranked and assumed, as
// the extender ranks and binds every pod kube-scheduler sends it: its CPUs
// and memory should go where they strand the fewest GPUs (docs/scoring.md),
// and the next pod's rank must count them before the informer shows the
// bind.
func (pl *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	b, err := json.Marshal(pod)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	p, err := pl.embed.NewPod(b)
	if err != nil {
		// Out of sync, or annotations that do not parse: an error, so
		// that kube-scheduler retries after its backoff, as it does
		// when the extender's filter answers with an Error.
		return nil, fwk.AsStatus(err)
	}
	if !p.WantsTopology() {
		state.Write(stateKey, &cycle{pod: p, scoreOnly: true})
		return nil, fwk.NewStatus(fwk.Skip)
	}
	state.Write(stateKey, &cycle{pod: p})
	return nil, nil
}

// PreFilterExtensions returns the dry run's hooks.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// AddPod puts back a pod the dry run removed (a reprieve); other pods
// (nominated ones) the model does not count, as the extender does not.
func (pl *Plugin) AddPod(_ context.Context, state fwk.CycleState, _ *v1.Pod, added fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	c := cycleOf(state)
	if c == nil {
		return nil
	}
	uid := string(added.GetPod().UID)
	for i, r := range c.removed {
		if r == uid {
			c.removed = append(c.removed[:i], c.removed[i+1:]...)
			break
		}
	}
	return nil
}

// RemovePod notes a pod the dry run took off the node: Filter then asks
// whether the pod fits without its holdings.
func (pl *Plugin) RemovePod(_ context.Context, state fwk.CycleState, _ *v1.Pod, removed fwk.PodInfo, _ fwk.NodeInfo) *fwk.Status {
	if c := cycleOf(state); c != nil {
		c.removed = append(c.removed, string(removed.GetPod().UID))
	}
	return nil
}

// Filter is one node of the cycle's model; safe under kube-scheduler's
// parallel Filter calls.
func (pl *Plugin) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	c := cycleOf(state)
	if c == nil || c.scoreOnly {
		return nil
	}
	var removed []byte
	if len(c.removed) > 0 {
		removed = core.RemovedList(c.removed)
	}
	fit, reason := c.pod.Filter(nodeInfo.Node().Name, removed, len(c.removed))
	switch fit {
	case core.Fits:
		return nil
	case core.Unfit:
		return fwk.NewStatus(fwk.Unschedulable, reason)
	default:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason)
	}
}

// PreScore ranks every feasible node in one call.
func (pl *Plugin) PreScore(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	c := cycleOf(state)
	if c == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Node().Name
	}
	ranks, err := c.pod.Rank(names)
	if err != nil {
		return fwk.AsStatus(err)
	}
	c.ranks = make(map[string]int64, len(names))
	for i, name := range names {
		c.ranks[name] = ranks[i]
	}
	return nil
}

// Score is the node's rank from PreScore; NormalizeScore spreads the ranks.
func (pl *Plugin) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	c := cycleOf(state)
	if c == nil || c.ranks == nil {
		return 0, fwk.AsStatus(errors.New("flextopo: Score without PreScore"))
	}
	r, ok := c.ranks[nodeInfo.Node().Name]
	if !ok {
		return core.RankNone, nil
	}
	return r, nil
}

// ScoreExtensions returns NormalizeScore.
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore maps the cycle's ranks onto 0..100 as the extender's
// prioritize maps them onto 0..10 (ft_scores_of_ranks): the best nodes get
// 100, the others linearly less, a node where the pod cannot go 0.
func (pl *Plugin) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	ranks := make([]int64, len(scores))
	for i := range scores {
		ranks[i] = scores[i].Score
	}
	for i, s := range core.ScoresOfRanks(ranks, int(fwk.MaxNodeScore)) {
		scores[i].Score = s
	}
	return nil
}

// Reserve assumes the pod's units in the model, so that the next cycle
// sees them taken, and keeps the annotation for Bind.
func (pl *Plugin) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	c := cycleOf(state)
	if c == nil {
		return nil
	}
	ann, draAtBind, err := c.pod.Assume(nodeName)
	if c.scoreOnly && (core.IsNotFound(err) || core.IsFreed(err)) {
		// Only the rank reads the assumption of a pod that asks for no
		// device, and no filter of flextopo's chose its node. A node
		// the model has not seen yet, or a handle PostFilter freed
		// (a pod group's cycle reserves the nominated node after
		// PostFilter), is no reason to fail the cycle.
		klog.FromContext(ctx).V(4).Info("flextopo: not assumed", "pod", klog.KObj(pod), "node", nodeName, "err", err)
		ann, draAtBind, err = "", false, nil
	}
	if err != nil {
		return fwk.AsStatus(err)
	}
	placed(pod.UID)
	c.annotation, c.draAtBind = ann, draAtBind
	return nil
}

// Unreserve forgets the assumption (idempotent).
func (pl *Plugin) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ string) {
	if c := cycleOf(state); c != nil {
		pl.embed.Forget(string(pod.UID))
		c.pod.Free()
		roomFreed(klog.FromContext(ctx))
	}
}

// Bind writes one Binding that carries the allocation annotation, if any:
// kube-apiserver sets the node and merges the annotation in one update.
// A pod whose PreFilter wrote no cycle is left to the next binder
// (DefaultBinder).
func (pl *Plugin) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	c := cycleOf(state)
	if c == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	start := time.Now()
	ann := c.annotation
	var err error
	if c.draAtBind {
		ann, err = pl.assumeDRA(ctx, pod, nodeName)
	}
	if err == nil {
		err = pl.writeBinding(ctx, pod, nodeName, ann)
	}
	c.pod.Bound(nodeName, err, time.Since(start))
	c.pod.Free()
	if err != nil {
		return fwk.AsStatus(err)
	}
	return nil
}

func (pl *Plugin) writeBinding(ctx context.Context, pod *v1.Pod, nodeName, annotation string) error {
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if annotation != "" {
		binding.Annotations = map[string]string{pl.annKey: annotation}
	}
	if cacher := pl.h.APICacher(); cacher != nil {
		onFinish, err := cacher.BindPod(binding)
		if err != nil {
			return err
		}
		return cacher.WaitOnFinish(ctx, onFinish)
	}
	klog.FromContext(ctx).V(3).Info("flextopo: binding", "pod", klog.KObj(pod), "node", nodeName, "annotation", annotation)
	return pl.h.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
}

// assumeDRA reads the pod and its claims after DynamicResources' PreBind
// wrote them, as the extender's bind does, and assumes the CPUs near the
// devices DRA chose.
func (pl *Plugin) assumeDRA(ctx context.Context, pod *v1.Pod, nodeName string) (string, error) {
	cs := pl.h.ClientSet()
	fresh, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	var names []string
	for _, rc := range fresh.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			names = append(names, *rc.ResourceClaimName)
		}
	}
	for _, st := range fresh.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil {
			names = append(names, *st.ResourceClaimName)
		}
	}
	if st := fresh.Status.ExtendedResourceClaimStatus; st != nil {
		names = append(names, st.ResourceClaimName)
	}
	claims := make([]interface{}, 0, len(names))
	for _, name := range names {
		claim, err := cs.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		claims = append(claims, claim)
	}
	podJSON, err := json.Marshal(fresh)
	if err != nil {
		return "", err
	}
	claimsJSON, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	return pl.embed.AssumeDRA(podJSON, nodeName, claimsJSON)
}

// EventsToRegister: what can make a node flextopo refused fit, and the
// events preemption in progress waits on (DefaultPreemption's).
func (pl *Plugin) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAnnotation | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete | fwk.UpdatePodScaleDown}},
	}
	if pl.embed.DRA() {
		events = append(events,
			fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.All}},
			fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.All}})
	}
	return events, nil
}
