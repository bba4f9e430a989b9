package e2e

// The invariants of the DRA scenarios (dra_test.go), read from the API
// server and from the extender's debug API:
//
//  1. no device is in two claims' allocations (a shared claim is one claim);
//  2. on each DRA node, flextopo's used GPUs and MIG devices and its claim
//     holdings (/debug/nodes: gpus.used, mig.used, dra.claims) are the
//     devices and claims of the claims allocated there; on a device-plugin
//     node, its used GPUs are those the allocations of its pods name;
//  3. each bound pod's flextopo.io/allocation names exactly the GPUs and MIG
//     devices of its claims, with the dra key naming each device by claim,
//     pool and device; a guaranteed numa pod's cpuset lies on its GPUs'
//     NUMA node; pods on device-plugin nodes never share a GPU.
//
// 1 and 3 hold at every instant, so they are checked on consistent lists
// (pods listed before claims: a claim reserved for a pod that is still
// bound keeps the allocation it had when the pod was bound). 2 holds once
// flextopo's watch has caught up: it is checked for a node only when no
// claim of that node changed for draQuiet, and a difference is confirmed on
// a fresh list before it counts; at quiescent points (checkpoint) it must
// hold for every node within draLag.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const (
	// draQuiet: a node whose claims did not change for this long must
	// look the same in flextopo's model.
	draQuiet = 3 * time.Second
	// draLag: at a quiescent point, the longest flextopo's model may take
	// to show the API server's state.
	draLag = 20 * time.Second
)

type violation struct {
	first time.Time
	msg   string
}

// draChecker watches the claims and checks the invariants.
type draChecker struct {
	r     *draRig
	store cache.Store
	stop  chan struct{}

	mu         sync.Mutex
	lastChange map[string]time.Time // node -> last claim event touching it
	lastEvent  time.Time            // any claim event
	violations []violation
	seen       map[string]int // violation message -> times seen

	paused atomic.Bool // the extender is down on purpose

	// What was checked, for the log: rounds of the background loop, pods
	// whose allocation was compared with their claims, claims whose
	// devices were checked for overlap, node models compared (quiet) and
	// skipped (busy).
	rounds, pods, claims, pinned, nodesCompared, nodesBusy atomic.Int64
	boundSeen                                              sync.Map // uid -> "<kind> on DRA|device-plugin" of each pod checked bound
}

func newDRAChecker(r *draRig) *draChecker {
	k := &draChecker{r: r, stop: make(chan struct{}), lastChange: map[string]time.Time{}, seen: map[string]int{}}
	factory := informers.NewSharedInformerFactory(r.c.Client, 0)
	inf := factory.Resource().V1().ResourceClaims().Informer()
	touch := func(objs ...interface{}) {
		now := time.Now()
		k.mu.Lock()
		defer k.mu.Unlock()
		k.lastEvent = now
		for _, o := range objs {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if c, ok := o.(*resourceapi.ResourceClaim); ok {
				if n := claimNode(c); n != "" {
					k.lastChange[n] = now
				}
			}
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { touch(o) },
		UpdateFunc: func(o, n interface{}) { touch(o, n) },
		DeleteFunc: func(o interface{}) { touch(o) },
	})
	if err != nil {
		r.t.Fatal(err)
	}
	k.store = inf.GetStore()
	factory.Start(k.stop)
	for typ, ok := range factory.WaitForCacheSync(k.stop) {
		if !ok {
			r.t.Fatalf("informer %v did not sync", typ)
		}
	}
	r.t.Cleanup(func() { close(k.stop); factory.Shutdown() })
	return k
}

// violate records a violation; one seen again is counted, not repeated.
func (k *draChecker) violate(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seen[msg] == 0 && len(k.violations) < 200 {
		k.violations = append(k.violations, violation{first: time.Now(), msg: msg})
	}
	k.seen[msg]++
}

// failures reports the violations found so far as test errors.
func (k *draChecker) failures(t *testing.T) bool {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, v := range k.violations {
		t.Errorf("%s (first at %s, seen %d times)", v.msg, v.first.Format("15:04:05.000"), k.seen[v.msg])
	}
	n := len(k.violations)
	k.violations = nil
	k.seen = map[string]int{}
	return n > 0
}

func (k *draChecker) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.violations)
}

// run checks every `every` until ctx ends.
func (k *draChecker) run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k.round(ctx, false)
	}
}

// round checks invariants 1 and 3 on fresh lists and 2 on the quiet nodes.
func (k *draChecker) round(ctx context.Context, strictModel bool) {
	k.rounds.Add(1)
	pods, err := k.r.c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			k.violate("list pods: %v", err)
		}
		return
	}
	claims, err := k.r.c.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			k.violate("list claims: %v", err)
		}
		return
	}
	k.checkDisjoint(claims.Items)
	k.checkPods(ctx, pods.Items, claims.Items)
	if !strictModel && !k.paused.Load() {
		k.checkQuietNodes(ctx)
	}
}

// checkDisjoint: invariant 1.
func (k *draChecker) checkDisjoint(claims []resourceapi.ResourceClaim) {
	owner := map[string]string{}
	for i := range claims {
		c := &claims[i]
		if c.Status.Allocation == nil {
			continue
		}
		k.claims.Add(1)
		node := claimNode(c)
		n := k.r.nodes[node]
		if n == nil || !n.dra {
			k.violate("claim %s/%s is allocated on node %q, not a DRA node of the test", c.Namespace, c.Name, node)
			continue
		}
		for _, res := range c.Status.Allocation.Devices.Results {
			if res.AdminAccess != nil && *res.AdminAccess {
				continue
			}
			if res.Driver != draDriver || res.Pool != node {
				k.violate("claim %s/%s on node %s: result %s/%s/%s is not of the node's pool", c.Namespace, c.Name, node,
					res.Driver, res.Pool, res.Device)
				continue
			}
			if _, ok := n.devices[res.Device]; !ok {
				k.violate("claim %s/%s: device %s is not published by node %s", c.Namespace, c.Name, res.Device, node)
			}
			key := res.Pool + "/" + res.Device
			me := c.Namespace + "/" + c.Name
			if other, dup := owner[key]; dup && other != me {
				k.violate("device %s is in the allocations of claims %s and %s", key, other, me)
			}
			owner[key] = me
		}
	}
}

// claimDevices are the devices of a claim's allocation, by device name.
func claimDevices(c *resourceapi.ResourceClaim) []string {
	var out []string
	if c.Status.Allocation == nil {
		return nil
	}
	for _, res := range c.Status.Allocation.Devices.Results {
		if res.Driver == draDriver && (res.AdminAccess == nil || !*res.AdminAccess) {
			out = append(out, res.Device)
		}
	}
	return out
}

// checkPods: invariant 3, pods listed before claims.
func (k *draChecker) checkPods(ctx context.Context, pods []corev1.Pod, claims []resourceapi.ResourceClaim) {
	byName := map[string]*resourceapi.ResourceClaim{}
	for i := range claims {
		byName[claims[i].Namespace+"/"+claims[i].Name] = &claims[i]
	}
	dpOwner := map[string]string{} // "node/uuid" -> pod, on device-plugin nodes
	var gone []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		n := k.r.nodes[p.Spec.NodeName]
		if n == nil {
			continue
		}
		k.pods.Add(1)
		if !n.dra {
			k.boundSeen.Store(p.UID, kindOf(p)+" on device-plugin")
			k.checkDevicePluginPod(p, n, dpOwner)
			continue
		}
		if stale := k.checkDRAPod(p, n, byName); stale {
			gone = append(gone, p)
		} else {
			k.boundSeen.Store(p.UID, kindOf(p)+" on DRA")
		}
	}
	// A claim that is no longer reserved for a pod bound before the claims
	// were listed: the pod must have been deleted meanwhile.
	for _, p := range gone {
		now, err := k.r.c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			if ctx.Err() == nil {
				k.violate("get pod %s/%s: %v", p.Namespace, p.Name, err)
			}
		case now.UID == p.UID && now.DeletionTimestamp == nil:
			k.violate("pod %s/%s is bound to %s, but its claims %v are not all allocated and reserved for it",
				p.Namespace, p.Name, p.Spec.NodeName, podClaimNames(p))
		}
	}
}

// kindOf is a random pod's kind (labelKind), else "other".
func kindOf(p *corev1.Pod) string {
	if kind := p.Labels[labelKind]; kind != "" {
		return strings.ReplaceAll(kind, "_", "/")
	}
	return "other"
}

// boundKinds counts the pods checked bound by kind and kind of node.
func (k *draChecker) boundKinds() map[string]int {
	out := map[string]int{}
	k.boundSeen.Range(func(_, v interface{}) bool { out[v.(string)]++; return true })
	return out
}

func podGPUs(p *corev1.Pod) int64 {
	q := p.Spec.Containers[0].Resources.Requests[flextopo.ResGPU]
	return q.Value()
}

func (k *draChecker) checkDevicePluginPod(p *corev1.Pod, n *draNode, owner map[string]string) {
	if names := podClaimNames(p); len(names) > 0 {
		k.violate("pod %s/%s has claims %v but is bound to device-plugin node %s", p.Namespace, p.Name, names, n.name)
	}
	want := podGPUs(p)
	if want == 0 {
		return
	}
	a, err := parseDRAAllocation(p.Annotations[flextopo.AnnAllocation])
	if err != nil {
		k.violate("pod %s/%s on %s: allocation %q: %v", p.Namespace, p.Name, n.name, p.Annotations[flextopo.AnnAllocation], err)
		return
	}
	if int64(len(a.GPUs)) != want || a.DRA != nil || a.Node != n.name {
		k.violate("pod %s/%s on device-plugin node %s: allocation names %v (node %s, dra %v), want %d GPUs of the node and no dra key",
			p.Namespace, p.Name, n.name, a.GPUs, a.Node, a.DRA != nil, want)
	}
	if p.Annotations[flextopo.AnnAffinity] == "numa" && p.Annotations[flextopo.AnnAffinityMode] == "guaranteed" &&
		p.Status.QOSClass == corev1.PodQOSGuaranteed {
		gpus := map[string]bool{}
		for _, g := range a.GPUs {
			gpus[g] = true
		}
		k.checkPinnedNUMA(p, n, a, gpus, nil)
	}
	for _, g := range a.GPUs {
		if !n.uuids[g] {
			k.violate("pod %s/%s: GPU %s is not a GPU of node %s", p.Namespace, p.Name, g, n.name)
		}
		key := n.name + "/" + g
		if other, dup := owner[key]; dup {
			k.violate("GPU %s of device-plugin node %s is in the allocations of pods %s and %s", g, n.name, other, p.Name)
		}
		owner[key] = p.Namespace + "/" + p.Name
	}
}

// checkDRAPod checks a bound pod on a DRA node; true when one of its claims
// is no longer reserved for it (then the pod must be gone).
func (k *draChecker) checkDRAPod(p *corev1.Pod, n *draNode, claims map[string]*resourceapi.ResourceClaim) bool {
	id := p.Namespace + "/" + p.Name
	names := podClaimNames(p)
	raw := p.Annotations[flextopo.AnnAllocation]
	if len(names) == 0 {
		if podGPUs(p) > 0 {
			k.violate("pod %s asks for nvidia.com/gpu and is bound to DRA node %s without a claim (KEP-5004)", id, n.name)
		}
		if raw != "" {
			if a, err := parseDRAAllocation(raw); err != nil || len(a.GPUs) > 0 || len(a.MIG) > 0 || a.DRA != nil {
				k.violate("pod %s without devices on %s: allocation %s", id, n.name, raw)
			}
		}
		return false
	}
	wantGPU, wantMIG, wantDRA := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, cn := range names {
		c := claims[p.Namespace+"/"+cn]
		if c == nil || c.Status.Allocation == nil || !reservedFor(c, string(p.UID)) {
			return true
		}
		if node := claimNode(c); node != n.name {
			k.violate("pod %s is bound to %s, its claim %s is allocated on %q", id, n.name, cn, node)
		}
		for _, dev := range claimDevices(c) {
			d, ok := n.devices[dev]
			if !ok {
				continue // checkDisjoint reports it
			}
			if d.kind == "mig" {
				wantMIG[d.uuid] = true
			} else {
				wantGPU[d.uuid] = true
			}
			wantDRA[fmt.Sprintf("%s/%s %s %s %s", p.Namespace, cn, n.name, dev, d.uuid)] = true
		}
	}
	if raw == "" {
		k.violate("pod %s is bound to DRA node %s without %s", id, n.name, flextopo.AnnAllocation)
		return false
	}
	a, err := parseDRAAllocation(raw)
	if err != nil {
		k.violate("pod %s: allocation %q: %v", id, raw, err)
		return false
	}
	gotMIG, gotDRA := map[string]bool{}, map[string]bool{}
	for _, m := range a.MIG {
		gotMIG[m.UUID] = true
	}
	if a.DRA != nil {
		for _, d := range a.DRA.Devices {
			if d.Driver != draDriver {
				k.violate("pod %s: allocation dra device %s of driver %q", id, d.Device, d.Driver)
			}
			gotDRA[fmt.Sprintf("%s %s %s %s", d.Claim, d.Pool, d.Device, d.UUID)] = true
		}
	}
	if a.Node != n.name || !sameSet(a.GPUs, keys(wantGPU)) || !sameSet(keys(gotMIG), keys(wantMIG)) ||
		a.DRA == nil || !sameSet(keys(gotDRA), keys(wantDRA)) {
		k.violate("pod %s on %s: allocation %s; its claims %v hold GPUs %v, MIG devices %v (dra devices %v)",
			id, n.name, raw, names, keys(wantGPU), keys(wantMIG), keys(wantDRA))
		return false
	}
	if q := podGPUs(p); q > 0 && int64(len(wantGPU)) != q {
		k.violate("pod %s asks for %d nvidia.com/gpu, its claims hold %v", id, q, keys(wantGPU))
	}
	if p.Annotations[flextopo.AnnAffinity] == "numa" && p.Annotations[flextopo.AnnAffinityMode] == "guaranteed" &&
		p.Status.QOSClass == corev1.PodQOSGuaranteed {
		k.checkPinnedNUMA(p, n, a, wantGPU, wantMIG)
	}
	return false
}

// checkPinnedNUMA: a guaranteed numa pod with integer CPUs has exactly its
// CPUs, on the NUMA node of all of its devices (by the node's topology).
func (k *draChecker) checkPinnedNUMA(p *corev1.Pod, n *draNode, a *draAllocationAnn, gpus, migs map[string]bool) {
	id := p.Namespace + "/" + p.Name
	k.pinned.Add(1)
	numa := map[int]bool{}
	for u := range gpus {
		numa[n.topo.NUMAOf(u)] = true
	}
	for u := range migs {
		parent, _, _ := n.topo.MIGInstanceOf(u)
		numa[n.topo.NUMAOf(parent)] = true
	}
	if len(numa) != 1 {
		k.violate("guaranteed numa pod %s: its devices are on NUMA nodes %v of %s", id, numa, n.name)
		return
	}
	var m int
	for m = range numa {
	}
	cpus, err := flextopo.ParseCPUList(a.CPUSet)
	want := p.Spec.Containers[0].Resources.Requests.Cpu().Value()
	if err != nil || int64(len(cpus)) != want {
		k.violate("guaranteed numa pod %s: cpuset %q, want %d CPUs (%v)", id, a.CPUSet, want, err)
		return
	}
	inNUMA := n.topo.NUMACPUs(m)
	for cpu := range cpus {
		if !inNUMA[cpu] {
			k.violate("guaranteed numa pod %s: CPU %d of cpuset %q is not on NUMA node %d of its GPUs", id, cpu, a.CPUSet, m)
			return
		}
	}
	if a.Level != "numa" || len(a.NUMANodes) != 1 || a.NUMANodes[0] != m {
		k.violate("guaranteed numa pod %s: level %q numaNodes %v, want numa and [%d]", id, a.Level, a.NUMANodes, m)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---- invariant 2: flextopo's model of each node ------------------------

// nodeUse is what one node holds: GPUs, MIG devices and claim holdings.
type nodeUse struct {
	GPUs, MIG, Claims int
}

// debugRow is the part of a /debug/nodes row the checks read.
type debugRow struct {
	Name string `json:"name"`
	GPUs struct {
		Total, Used, Unknown, Free int
	} `json:"gpus"`
	MIG struct {
		Total, Used int
	} `json:"mig"`
	DRA *struct {
		DoublePublished bool    `json:"doublePublished"`
		Error           *string `json:"error"`
		Claims          int     `json:"claims"`
	} `json:"dra"`
}

func (k *draChecker) debugGet(ctx context.Context, path string, out interface{}) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.r.ext.debugURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := k.r.ext.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: HTTP %d %s", path, resp.StatusCode, body)
	}
	return json.Unmarshal(body, out)
}

// modelRows is /debug/nodes by node name, the rig's nodes only.
func (k *draChecker) modelRows(ctx context.Context) (map[string]debugRow, error) {
	var body struct {
		Nodes []debugRow `json:"nodes"`
	}
	if err := k.debugGet(ctx, "/debug/nodes", &body); err != nil {
		return nil, err
	}
	out := map[string]debugRow{}
	for _, row := range body.Nodes {
		if k.r.nodes[row.Name] != nil {
			out[row.Name] = row
		}
	}
	return out, nil
}

// expectedUse is each DRA node's use by the claims.
func (k *draChecker) expectedUse(claims []*resourceapi.ResourceClaim) map[string]nodeUse {
	out := map[string]nodeUse{}
	for _, c := range claims {
		node := claimNode(c)
		n := k.r.nodes[node]
		devs := claimDevices(c)
		if n == nil || len(devs) == 0 {
			continue
		}
		u := out[node]
		u.Claims++
		for _, dev := range devs {
			if n.devices[dev].kind == "mig" {
				u.MIG++
			} else {
				u.GPUs++
			}
		}
		out[node] = u
	}
	return out
}

func (k *draChecker) storeClaims() []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for _, o := range k.store.List() {
		out = append(out, o.(*resourceapi.ResourceClaim))
	}
	return out
}

func (k *draChecker) listClaims(ctx context.Context) ([]*resourceapi.ResourceClaim, error) {
	list, err := k.r.c.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*resourceapi.ResourceClaim, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// rowUse is a row's use, and what is wrong with its dra part regardless.
func rowUse(n *draNode, row debugRow) (nodeUse, string) {
	u := nodeUse{GPUs: row.GPUs.Used, MIG: row.MIG.Used}
	switch {
	case !n.dra && row.DRA != nil:
		return u, "device-plugin node shown as a DRA node"
	case n.dra && row.DRA == nil:
		return u, "DRA node not shown as one (dra: null)"
	case row.GPUs.Unknown != 0:
		return u, fmt.Sprintf("%d GPUs of unknown placement", row.GPUs.Unknown)
	case row.GPUs.Free != row.GPUs.Total-row.GPUs.Used:
		return u, fmt.Sprintf("gpus free %d, total %d, used %d", row.GPUs.Free, row.GPUs.Total, row.GPUs.Used)
	case row.DRA != nil && (row.DRA.DoublePublished || (row.DRA.Error != nil && *row.DRA.Error != "")):
		return u, fmt.Sprintf("dra doublePublished %t error %v", row.DRA.DoublePublished, row.DRA.Error)
	}
	if row.DRA != nil {
		u.Claims = row.DRA.Claims
	}
	return u, ""
}

func (k *draChecker) lastChangeOf(node string) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastChange[node]
}

// checkQuietNodes: invariant 2 on the DRA nodes whose claims were quiet.
func (k *draChecker) checkQuietNodes(ctx context.Context) {
	start := time.Now()
	rows, err := k.modelRows(ctx)
	if err != nil {
		if ctx.Err() == nil && !k.paused.Load() {
			k.violate("extender debug API: %v", err)
		}
		return
	}
	exp := k.expectedUse(k.storeClaims())
	var suspects []string
	for name, n := range k.r.nodes {
		if !n.dra {
			continue
		}
		last := k.lastChangeOf(name)
		if start.Sub(last) < draQuiet {
			k.nodesBusy.Add(1)
			continue
		}
		got, bad := rowUse(n, rows[name])
		if bad != "" {
			k.violate("node %s: %s", name, bad)
		}
		if got != exp[name] {
			suspects = append(suspects, name)
			continue
		}
		k.nodesCompared.Add(1)
	}
	if len(suspects) == 0 {
		return
	}
	// Confirm on a fresh list: the test's own watch may lag too.
	time.Sleep(500 * time.Millisecond)
	claims, err := k.listClaims(ctx)
	if err != nil {
		return
	}
	fresh := k.expectedUse(claims)
	rows, err = k.modelRows(ctx)
	if err != nil {
		return
	}
	for _, name := range suspects {
		got, _ := rowUse(k.r.nodes[name], rows[name])
		if time.Since(k.lastChangeOf(name)) < draQuiet || fresh[name] != exp[name] {
			k.nodesBusy.Add(1)
			continue
		}
		k.nodesCompared.Add(1)
		if got != fresh[name] {
			k.violate("node %s: flextopo shows %+v, its claims hold %+v (no claim of the node changed for %s)",
				name, got, fresh[name], draQuiet)
		}
	}
}

// devicePluginUse is each device-plugin node's used GPUs by the
// allocations of its bound pods.
func (k *draChecker) devicePluginUse(ctx context.Context) (map[string]nodeUse, error) {
	pods, err := k.r.c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	used := map[string]map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		n := k.r.nodes[p.Spec.NodeName]
		if n == nil || n.dra {
			continue
		}
		a, err := parseDRAAllocation(p.Annotations[flextopo.AnnAllocation])
		if err != nil {
			continue
		}
		if used[n.name] == nil {
			used[n.name] = map[string]bool{}
		}
		for _, g := range a.GPUs {
			used[n.name][g] = true
		}
	}
	out := map[string]nodeUse{}
	for name, n := range k.r.nodes {
		if !n.dra {
			out[name] = nodeUse{GPUs: len(used[name])}
		}
	}
	return out, nil
}

// checkpoint waits for a quiescent cluster (no pod pending: unbound pods
// are deleted; no claim changed for draQuiet) and then requires invariant 2
// on every node within draLag, besides 1 and 3. It returns the model
// (checkpointModel) it agreed with.
func (k *draChecker) checkpoint(ctx context.Context, t *testing.T, what string) map[string]json.RawMessage {
	t.Helper()
	start := time.Now()
	k.settle(ctx, t)
	k.round(ctx, true)
	deadline := time.Now().Add(draLag)
	var diff []string
	for {
		claims, err := k.listClaims(ctx)
		if err != nil {
			t.Fatal(err)
		}
		exp := k.expectedUse(claims)
		dp, err := k.devicePluginUse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for name, u := range dp {
			exp[name] = u
		}
		rows, err := k.modelRows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		diff = nil
		for name, n := range k.r.nodes {
			row, ok := rows[name]
			if !ok {
				diff = append(diff, name+": not in the model")
				continue
			}
			got, bad := rowUse(n, row)
			if bad != "" {
				diff = append(diff, name+": "+bad)
			}
			if got != exp[name] {
				diff = append(diff, fmt.Sprintf("%s: flextopo %+v, API %+v", name, got, exp[name]))
			}
		}
		if len(diff) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	sort.Strings(diff)
	for _, d := range diff {
		k.violate("%s: %s", what, d)
	}
	model := k.model(ctx, t)
	t.Logf("checkpoint %s: quiescent and checked in %s", what, time.Since(start).Round(time.Millisecond))
	return model
}

// settle deletes the pods that are not bound and waits until no pod is
// pending and no claim changed for draQuiet.
func (k *draChecker) settle(ctx context.Context, t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pods, err := k.r.c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pending := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Spec.NodeName == "" {
				pending++
				if err := k.r.deletePod(ctx, p.Namespace, p.Name); err != nil {
					t.Fatal(err)
				}
			}
		}
		k.mu.Lock()
		quiet := time.Since(k.lastEvent)
		k.mu.Unlock()
		if pending == 0 && quiet >= draQuiet {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not quiescent after 2 minutes: %d pods pending, last claim change %s ago", pending, quiet)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// model is flextopo's model of the rig's nodes, for comparing across a
// restart: per node the row's counts and dra part and the holdings (pods
// and claims), sorted by uid.
func (k *draChecker) model(ctx context.Context, t *testing.T) map[string]json.RawMessage {
	t.Helper()
	var all struct {
		Nodes []map[string]json.RawMessage `json:"nodes"`
	}
	if err := k.debugGet(ctx, "/debug/nodes", &all); err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, row := range all.Nodes {
		var name string
		_ = json.Unmarshal(row["name"], &name)
		if k.r.nodes[name] == nil {
			continue
		}
		var detail struct {
			Holdings []map[string]interface{} `json:"holdings"`
		}
		if err := k.debugGet(ctx, "/debug/nodes/"+name, &detail); err != nil {
			t.Fatal(err)
		}
		sort.Slice(detail.Holdings, func(i, j int) bool {
			return fmt.Sprint(detail.Holdings[i]["uid"]) < fmt.Sprint(detail.Holdings[j]["uid"])
		})
		kept := map[string]interface{}{"holdings": detail.Holdings}
		for _, key := range []string{"gpus", "mig", "cpus", "memoryMiB", "dra", "pods", "assumedPods", "conflicts", "topologyError"} {
			kept[key] = row[key]
		}
		raw, err := json.Marshal(kept)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = raw
	}
	return out
}

// modelDiff lists the nodes whose models differ.
func modelDiff(before, after map[string]json.RawMessage) []string {
	var out []string
	for name, b := range before {
		if a := after[name]; string(a) != string(b) {
			out = append(out, fmt.Sprintf("node %s:\n  before %s\n  after  %s", name, b, a))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			out = append(out, "node "+name+" only after")
		}
	}
	sort.Strings(out)
	return out
}

// restart kills the extender (SIGKILL), starts it again and requires its
// model to equal `before` (taken at a quiescent point) within draLag.
func (k *draChecker) restart(ctx context.Context, t *testing.T, before map[string]json.RawMessage) {
	t.Helper()
	k.paused.Store(true)
	start := time.Now()
	k.r.ext.kill()
	k.r.ext.start(t)
	ready := time.Since(start)
	deadline := time.Now().Add(draLag)
	var diff []string
	for {
		diff = modelDiff(before, k.model(ctx, t))
		if len(diff) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	k.paused.Store(false)
	for _, d := range diff {
		k.violate("after the extender's restart the model differs: %s", d)
	}
	holdings := 0
	for _, raw := range before {
		holdings += strings.Count(string(raw), `"uid"`)
	}
	t.Logf("extender killed (SIGKILL) and started again: ready in %s; model of %d nodes (%d holdings) %s",
		ready.Round(time.Millisecond), len(before), holdings, map[bool]string{true: "equal", false: "DIFFERENT"}[len(diff) == 0])
}

func (k *draChecker) stats() string {
	distinct := 0
	k.boundSeen.Range(func(_, _ interface{}) bool { distinct++; return true })
	return fmt.Sprintf("%d check rounds: %d bound pods' allocations (%d distinct pods; %d guaranteed numa cpusets) and %d allocated claims checked, %d quiet node models compared (%d skipped while busy)",
		k.rounds.Load(), k.pods.Load(), distinct, k.pinned.Load(), k.claims.Load(), k.nodesCompared.Load(), k.nodesBusy.Load())
}

// waitPodsDecided waits until each pod is bound or marked Unschedulable.
func (r *draRig) waitPodsDecided(ctx context.Context, ns string, names []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	left := map[string]bool{}
	for _, n := range names {
		left[n] = true
	}
	for len(left) > 0 {
		pods, err := r.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for i := range pods.Items {
			p := &pods.Items[i]
			seen[p.Name] = true
			if !left[p.Name] {
				continue
			}
			cond := harness.PodCondition(p, corev1.PodScheduled)
			if p.Spec.NodeName != "" || (cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable) {
				delete(left, p.Name)
			}
		}
		for n := range left {
			if !seen[n] {
				delete(left, n) // deleted meanwhile
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for n := range left {
				for i := range pods.Items {
					if p := &pods.Items[i]; p.Name == n {
						fmt.Fprintf(&b, "\n  %s: %s", n, podConditionText(p))
					}
				}
			}
			return fmt.Errorf("%d pods neither bound nor unschedulable after %s:%s", len(left), timeout, b.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}
