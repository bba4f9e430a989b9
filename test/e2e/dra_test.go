package e2e

// TestDRA runs flextopo on a DRA cluster (docs/dra.md): kube-scheduler's
// DynamicResources plugin picks the GPUs of ResourceClaims, flextopo counts
// the claims and places the pods' CPUs near them, and device-plugin nodes
// beside the DRA nodes are served by flextopo as before. dra_rig_test.go
// describes the rig, dra_check_test.go the invariants it checks all along.
//
// The nodes: four 8x A100 DRA nodes (api/examples/a100-8x.json, the slice
// of resourceslice-a100-8x.json, each with its own uuids and its devices in
// a seeded random order, as the driver's map order is arbitrary), one 8x
// H100 DRA node with MIG (h100-8x-mig.json, resourceslice-h100-mig.json),
// two 8x A100 device-plugin nodes, and one more A100 DRA node kept apart
// for the preemption case.
//
// Subtests, in order on the one cluster:
//   - NUMAPinned: a guaranteed numa pod with pinned CPUs and a two-GPU
//     claim template; the webhook made the template's constraint, DRA's GPUs
//     share a NUMA node, the cpuset lies on it.
//   - SharedClaim: two pods share one ResourceClaim: one holding, both
//     allocations name its GPU, freed when the last pod goes.
//   - ExtendedResource: nvidia.com/gpu on a DRA node becomes
//     kube-scheduler's claim (KEP-5004) whose GPUs the allocation names; on a
//     device-plugin node flextopo picks them.
//   - Randomized: FLEXTOPO_E2E_DRA_PODS (default 300) seeded random pods
//     (FLEXTOPO_E2E_DRA_SEED, default 1) created, scheduled and deleted in
//     waves, with the invariants checked every few seconds, at checkpoints
//     and at the end, and the extender killed and restarted half way.
//   - NoVictimsForDRAGPUs: a high-priority guaranteed pod short of CPUs on a
//     DRA node whose free GPUs are on two NUMA nodes: kube-scheduler
//     proposes evicting a CPU-only pod, and flextopo drops the node (the
//     GPU shortage needs KEP-5690), so nothing is evicted; once an aligned
//     pair is free, the same eviction is let through.
//   - Plugin: two guaranteed numa pods through flextopo-scheduler, its
//     model fed by kube-scheduler's informers and its own webhook making the
//     template's constraint (dra_plugin_test.go).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

func TestDRA(t *testing.T) {
	r := newDRARig(t, "dra")
	seed, err := strconv.ParseUint(os.Getenv("FLEXTOPO_E2E_DRA_SEED"), 10, 64)
	if err != nil {
		seed = 1
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	// labelPool (fragmentation_test.go) keeps the random pods off the node
	// of the preemption case.
	random := map[string]string{labelPool: "random"}
	for _, short := range []string{"a", "b", "c", "d"} {
		r.addDRANode(short, "a100-8x.json", "resourceslice-a100-8x.json", shuffled(rng), random)
	}
	r.addDRANode("mig", "h100-8x-mig.json", "resourceslice-h100-mig.json", shuffled(rng), random)
	r.addDevicePluginNode("dp-a", "a100-8x.json", random)
	r.addDevicePluginNode("dp-b", "a100-8x.json", random)
	// gpu-3 (NUMA node 0) and gpu-7 (NUMA node 1) last: six one-GPU claims
	// leave exactly those two free.
	r.addDRANode("pre", "a100-8x.json", "resourceslice-a100-8x.json", func([]string) []string {
		return []string{"gpu-0", "gpu-1", "gpu-2", "gpu-4", "gpu-5", "gpu-6", "gpu-3", "gpu-7"}
	}, map[string]string{labelPool: "preempt"})
	// The Plugin subtest's node, its devices in a fixed order: rng's
	// draws stay those of the other nodes and pods.
	r.addDRANode(pluginDRANode, "a100-8x.json", "resourceslice-a100-8x.json", slices.Clone,
		map[string]string{labelPool: "plugin"})
	r.setupClaims()
	k := newDRAChecker(r)
	r.waitModelHasNodes(k)

	cx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.run(cx, 3*time.Second) }()
	t.Cleanup(func() { cancel(); <-done })

	t.Run("NUMAPinned", func(t *testing.T) { r.numaPinned(t, k) })
	t.Run("SharedClaim", func(t *testing.T) { r.sharedClaim(t, k) })
	t.Run("ExtendedResource", func(t *testing.T) { r.extendedResource(t, k) })
	t.Run("Randomized", func(t *testing.T) { r.randomized(t, k, rng, seed) })
	t.Run("NoVictimsForDRAGPUs", func(t *testing.T) { r.noVictims(t, k) })
	t.Run("Plugin", func(t *testing.T) { r.pluginFrontEnd(t) })

	cancel()
	<-done
	k.round(context.Background(), true)
	t.Logf("invariants: %s", k.stats())
	k.failures(t)
}

// setupClaims creates the claim templates and shared claims of the pods.
func (r *draRig) setupClaims() {
	ns := r.s.ns
	for _, g := range []int{1, 2, 4} {
		r.createTemplate(ns, fmt.Sprintf("gpu-%d", g), claimSpec(draClassGPU, g, ""), nil)
		r.createTemplate(ns, fmt.Sprintf("numa-%d", g), claimSpec(draClassGPU, g, ""), alignedNUMA)
	}
	for _, p := range []string{"1g.10gb", "3g.40gb"} {
		r.createTemplate(ns, "mig-"+strings.ReplaceAll(p, ".", ""), claimSpec(draClassMIG, 1,
			"device.attributes['"+draDriver+"'].profile == '"+p+"'"), nil)
	}
	// Two GPUs with no constraint, for a numa pod that DRA may split.
	r.createTemplate(ns, "loose-2", claimSpec(draClassGPU, 2, ""), nil)
	for i := 0; i < 4; i++ {
		r.createClaim(ns, fmt.Sprintf("shared-%d", i), claimSpec(draClassGPU, 1, ""))
	}
}

// waitModelHasNodes waits until the extender's model shows every node of
// the rig as it is: DRA nodes with all their devices matched, device-plugin
// nodes without a dra part.
func (r *draRig) waitModelHasNodes(k *draChecker) {
	r.t.Helper()
	cx := harness.Ctx(r.t, time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := k.modelRows(cx)
		var missing []string
		for name, n := range r.nodes {
			row, ok := rows[name]
			if !ok {
				missing = append(missing, name+": not in the model")
				continue
			}
			if _, bad := rowUse(n, row); bad != "" {
				missing = append(missing, name+": "+bad)
			}
			gpus, migs := 0, 0
			for _, d := range n.devices {
				if d.kind == "mig" {
					migs++
				} else {
					gpus++
				}
			}
			if n.dra && (row.GPUs.Total != gpus || row.MIG.Total != migs) {
				missing = append(missing, fmt.Sprintf("%s: %d GPUs and %d MIG devices in the model, %d and %d published",
					name, row.GPUs.Total, row.MIG.Total, gpus, migs))
			}
		}
		if err == nil && len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the extender's model does not show the nodes: %v %v", err, missing)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// getClaim reads a claim.
func (r *draRig) getClaim(t *testing.T, ns, name string) *resourceapi.ResourceClaim {
	t.Helper()
	cx := harness.Ctx(t, 30*time.Second)
	c, err := r.c.Client.ResourceV1().ResourceClaims(ns).Get(cx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get claim %s/%s: %v", ns, name, err)
	}
	return c
}

// waitBound waits until the pod is bound with an allocation annotation.
func (r *draRig) waitBound(t *testing.T, name string) (*corev1.Pod, *draAllocationAnn) {
	t.Helper()
	s := *r.s
	s.t = t
	pod := s.waitBound(name, true)
	a, err := parseDRAAllocation(pod.Annotations[flextopo.AnnAllocation])
	if err != nil {
		t.Fatalf("pod %s: allocation: %v", name, err)
	}
	t.Logf("pod %s -> %s: %s", name, pod.Spec.NodeName, pod.Annotations[flextopo.AnnAllocation])
	return pod, a
}

// holdings is /debug/nodes/<node>'s holdings.
type holding struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	UID           string `json:"uid"`
	ResourceClaim bool   `json:"resourceClaim"`
	GPUs          []int  `json:"gpus"`
	CPUs          string `json:"cpus"`
}

func (r *draRig) holdings(t *testing.T, k *draChecker, node string) []holding {
	t.Helper()
	var detail struct {
		Holdings []holding `json:"holdings"`
	}
	if err := k.debugGet(harness.Ctx(t, 10*time.Second), "/debug/nodes/"+node, &detail); err != nil {
		t.Fatal(err)
	}
	return detail.Holdings
}

// waitHoldings polls the node's holdings until ok accepts them.
func (r *draRig) waitHoldings(t *testing.T, k *draChecker, node, what string, ok func([]holding) bool) []holding {
	t.Helper()
	deadline := time.Now().Add(draLag)
	for {
		h := r.holdings(t, k, node)
		if ok(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: %s not in the extender's model after %s; holdings %+v", node, what, draLag, h)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func findHolding(hs []holding, name string, claim bool) *holding {
	for i := range hs {
		if hs[i].Name == name && hs[i].ResourceClaim == claim {
			return &hs[i]
		}
	}
	return nil
}

// gpuIndexes are the topology indexes of GPU uuids, sorted.
func gpuIndexes(n *draNode, uuids []string) []int {
	var out []int
	for _, u := range uuids {
		out = append(out, n.topo.GPUIndexOf(u))
	}
	sort.Ints(out)
	return out
}

// numaPinned: a guaranteed numa pod with 8 pinned CPUs and a two-GPU claim
// of a template with flextopo's affinity annotations.
func (r *draRig) numaPinned(t *testing.T, k *draChecker) {
	ns := r.s.ns
	cx := harness.Ctx(t, 30*time.Second)
	tmpl, err := r.c.Client.ResourceV1().ResourceClaimTemplates(ns).Get(cx, "numa-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasNUMAConstraint(&tmpl.Spec.Spec) {
		t.Errorf("template numa-2: constraints %+v; the webhook should have added matchAttribute %s", tmpl.Spec.Spec.Devices.Constraints, attrNUMA)
	}
	node := r.nodes[r.s.nodeName("a")]
	r.deleteAtEnd(t, "pinned")
	r.createPod(r.s, draPodSpec{name: "pinned", template: "numa-2", cpu: "8", memory: "16Gi", guaranteed: true,
		affinity: "numa", node: node.name})
	pod, a := r.waitBound(t, "pinned")
	if pod.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Errorf("pod pinned: QoS %s, want Guaranteed", pod.Status.QOSClass)
	}
	names := podClaimNames(pod)
	if len(names) != 1 {
		t.Fatalf("pod pinned: claims %v, want its template's one", names)
	}
	claim := r.getClaim(t, ns, names[0])
	if !hasNUMAConstraint(&claim.Spec) {
		t.Errorf("claim %s: constraints %+v, want matchAttribute %s", claim.Name, claim.Spec.Devices.Constraints, attrNUMA)
	}
	uuids := checkPinnedClaim(t, ns, "pinned", node, claim, a)
	if a.MemoryMiB != 16384 {
		t.Errorf("pod pinned: memoryMiB %d, want 16384", a.MemoryMiB)
	}
	// In the model the claim holds the GPUs, the pod its CPUs.
	r.waitHoldings(t, k, node.name, "claim "+claim.Name, func(hs []holding) bool {
		c, p := findHolding(hs, claim.Name, true), findHolding(hs, "pinned", false)
		return c != nil && p != nil && slices.Equal(c.GPUs, gpuIndexes(node, uuids)) && len(p.GPUs) == 0 && p.CPUs == a.CPUSet
	})
	r.deleteAndWaitFree(t, k, []string{"pinned"}, node.name)
}

// checkPinnedClaim checks a guaranteed numa pod of a numa-2 template in
// namespace ns, bound to node with allocation a: its claim's two devices on
// one NUMA node of node, the allocation naming them (and each in its dra
// key), 8 CPUs on that NUMA node. It returns the devices' uuids.
func checkPinnedClaim(t *testing.T, ns, pod string, node *draNode, claim *resourceapi.ResourceClaim, a *draAllocationAnn) []string {
	t.Helper()
	devs := claimDevices(claim)
	var uuids []string
	numa := map[int]bool{}
	for _, d := range devs {
		uuids = append(uuids, node.devices[d].uuid)
		numa[node.devices[d].numa] = true
	}
	if len(devs) != 2 || len(numa) != 1 || claimNode(claim) != node.name {
		t.Fatalf("claim %s: devices %v on NUMA nodes %v of %q; want two on one NUMA node of %s", claim.Name, devs, numa, claimNode(claim), node.name)
	}
	if !sameSet(a.GPUs, uuids) {
		t.Errorf("pod %s: allocation gpus %v, its claim holds %v", pod, a.GPUs, uuids)
	}
	checkNUMAAllocation(t, pod, a, node.topo, 8, 2)
	if a.DRA == nil || len(a.DRA.Devices) != 2 {
		t.Fatalf("pod %s: allocation has no dra key with two devices: %+v", pod, a.DRA)
	}
	for _, d := range a.DRA.Devices {
		if d.Claim != ns+"/"+claim.Name || d.ClaimUID != string(claim.UID) || d.Pool != node.name || d.Request != claimRequest ||
			!slices.Contains(devs, d.Device) || node.devices[d.Device].uuid != d.UUID {
			t.Errorf("pod %s: dra device %+v, want one of %v of claim %s (%s), pool %s", pod, d, devs, claim.Name, claim.UID, node.name)
		}
	}
	return uuids
}

func hasNUMAConstraint(spec *resourceapi.ResourceClaimSpec) bool {
	for _, c := range spec.Devices.Constraints {
		if c.MatchAttribute != nil && string(*c.MatchAttribute) == attrNUMA &&
			(len(c.Requests) == 0 || slices.Contains(c.Requests, claimRequest)) {
			return true
		}
	}
	return false
}

// deleteAndWaitFree deletes pods and waits until the claims they used
// hold nothing on the node, in the model.
func (r *draRig) deleteAndWaitFree(t *testing.T, k *draChecker, pods []string, node string) {
	t.Helper()
	cx := harness.Ctx(t, time.Minute)
	claims := map[string]bool{}
	for _, name := range pods {
		p, err := r.c.Client.CoreV1().Pods(r.s.ns).Get(cx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range podClaimNames(p) {
			claims[c] = true
		}
		if err := r.deletePod(cx, r.s.ns, name); err != nil {
			t.Fatal(err)
		}
	}
	r.waitHoldings(t, k, node, fmt.Sprintf("claims %v gone", keys(claims)), func(hs []holding) bool {
		for _, h := range hs {
			if h.ResourceClaim && claims[h.Name] {
				return false
			}
		}
		return true
	})
}

// nudge gives kube-scheduler an event that requeues a pod refused for
// CPUs: a pod bound to the node by name, then deleted (NodeResourcesFit
// requeues on the deletion of any scheduled pod, noderesources/fit.go).
// Deleting the holders' pods requeues such a pod at once, but their claims
// are deallocated by kube-controller-manager only afterwards, and
// flextopo's model frees the GPUs with the claims. A preempt call in
// between still finds the GPUs held and drops the node; the deallocation
// itself requeues nothing, since DynamicResources did not refuse the pod
// (NodeResourcesFit did). On a live cluster the next deletion of a
// scheduled pod anywhere does this; in the test nothing else happens for
// five minutes (podMaxInUnschedulablePodsDuration). Call it once the model
// is current.
func (r *draRig) nudge(t *testing.T, node string) {
	t.Helper()
	r.deleteAtEnd(t, "nudge")
	s := *r.s
	s.t = t
	s.createPod(podSpec{name: "nudge", cpu: "1", memory: "16Mi", nodeName: node})
	if err := r.deletePod(harness.Ctx(t, 30*time.Second), r.s.ns, "nudge"); err != nil {
		t.Fatal(err)
	}
}

// deleteAtEnd deletes the pods when the test ends, also when it fails, so
// that the next subtests find the nodes as they expect.
func (r *draRig) deleteAtEnd(t *testing.T, pods ...string) {
	t.Cleanup(func() {
		cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, p := range pods {
			if err := r.deletePod(cx, r.s.ns, p); err != nil {
				t.Log(err)
			}
		}
	})
}

// sharedClaim: two pods use one ResourceClaim.
func (r *draRig) sharedClaim(t *testing.T, k *draChecker) {
	ns := r.s.ns
	r.createClaim(ns, "pair-shared", claimSpec(draClassGPU, 1, ""))
	r.deleteAtEnd(t, "share-a", "share-b")
	for _, p := range []string{"share-a", "share-b"} {
		r.createPod(r.s, draPodSpec{name: p, claim: "pair-shared", cpu: "500m", memory: "1Gi", pool: "random"})
	}
	pa, aa := r.waitBound(t, "share-a")
	pb, ab := r.waitBound(t, "share-b")
	claim := r.getClaim(t, ns, "pair-shared")
	node := r.nodes[claimNode(claim)]
	devs := claimDevices(claim)
	if node == nil || len(devs) != 1 || pa.Spec.NodeName != node.name || pb.Spec.NodeName != node.name {
		t.Fatalf("claim pair-shared: devices %v on %q; pods on %s and %s", devs, claimNode(claim), pa.Spec.NodeName, pb.Spec.NodeName)
	}
	if !reservedFor(claim, string(pa.UID)) || !reservedFor(claim, string(pb.UID)) {
		t.Errorf("claim pair-shared: reservedFor %+v, want both pods", claim.Status.ReservedFor)
	}
	uuid := node.devices[devs[0]].uuid
	for _, a := range []*draAllocationAnn{aa, ab} {
		if !slices.Equal(a.GPUs, []string{uuid}) || a.DRA == nil || len(a.DRA.Devices) != 1 || a.DRA.Devices[0].Claim != ns+"/pair-shared" {
			t.Errorf("allocation gpus %v dra %+v; want [%s] of claim pair-shared", a.GPUs, a.DRA, uuid)
		}
	}
	// One holding for the claim; the pods hold no GPU.
	r.waitHoldings(t, k, node.name, "claim pair-shared", func(hs []holding) bool {
		c := findHolding(hs, "pair-shared", true)
		return c != nil && slices.Equal(c.GPUs, gpuIndexes(node, []string{uuid})) &&
			findHolding(hs, "share-a", false) != nil && len(findHolding(hs, "share-a", false).GPUs) == 0 &&
			findHolding(hs, "share-b", false) != nil && len(findHolding(hs, "share-b", false).GPUs) == 0
	})
	// The claim stays allocated, on the same device, while one pod uses it.
	cx := harness.Ctx(t, time.Minute)
	if err := r.deletePod(cx, ns, "share-a"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		claim = r.getClaim(t, ns, "pair-shared")
		if len(claim.Status.ReservedFor) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim pair-shared: reservedFor %+v 30s after share-a was deleted", claim.Status.ReservedFor)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := claimDevices(claim); !slices.Equal(got, devs) || !reservedFor(claim, string(pb.UID)) {
		t.Errorf("claim pair-shared after share-a went: devices %v reservedFor %+v; want %v for share-b", got, claim.Status.ReservedFor, devs)
	}
	if h := r.holdings(t, k, node.name); findHolding(h, "pair-shared", true) == nil {
		t.Errorf("node %s: the claim's holding is gone while share-b uses it: %+v", node.name, h)
	}
	r.deleteAndWaitFree(t, k, []string{"share-b"}, node.name)
	if claim = r.getClaim(t, ns, "pair-shared"); claim.Status.Allocation != nil {
		t.Errorf("claim pair-shared: still allocated after its pods went: %+v", claim.Status.Allocation)
	}
}

// extendedResource: nvidia.com/gpu pods on a DRA and a device-plugin node.
func (r *draRig) extendedResource(t *testing.T, k *draChecker) {
	ns := r.s.ns
	dra, dp := r.nodes[r.s.nodeName("b")], r.nodes[r.s.nodeName("dp-a")]
	r.deleteAtEnd(t, "legacy", "legacy-dp")
	r.createPod(r.s, draPodSpec{name: "legacy", gpus: 2, cpu: "1", memory: "1Gi", node: dra.name})
	r.createPod(r.s, draPodSpec{name: "legacy-dp", gpus: 2, cpu: "1", memory: "1Gi", node: dp.name})
	pod, a := r.waitBound(t, "legacy")
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil {
		t.Fatalf("pod legacy on DRA node %s: no status.extendedResourceClaimStatus", dra.name)
	}
	wantMap := []corev1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: flextopo.ResGPU,
		RequestName: "container-0-request-2"}}
	if !slices.Equal(st.RequestMappings, wantMap) {
		t.Errorf("pod legacy: requestMappings %+v, want %+v (requests cpu, memory, nvidia.com/gpu: index 2)", st.RequestMappings, wantMap)
	}
	claim := r.getClaim(t, ns, st.ResourceClaimName)
	t.Logf("KEP-5004 claim %s: annotations %v, owner %+v, requests %+v", claim.Name, claim.Annotations, claim.OwnerReferences,
		claim.Spec.Devices.Requests)
	if claim.Annotations[annExtendedClaim] != "true" || claim.GenerateName != "legacy-extended-resources-" ||
		!strings.HasPrefix(claim.Name, "legacy-extended-resources-") {
		t.Errorf("claim %s: generateName %q annotations %v; want legacy-extended-resources- and %s: \"true\"",
			claim.Name, claim.GenerateName, claim.Annotations, annExtendedClaim)
	}
	if o := claim.OwnerReferences; len(o) != 1 || o[0].Kind != "Pod" || o[0].UID != pod.UID || o[0].Controller == nil || !*o[0].Controller {
		t.Errorf("claim %s: ownerReferences %+v, want the pod as controller", claim.Name, o)
	}
	if q := claim.Spec.Devices.Requests; len(q) != 1 || q[0].Name != "container-0-request-2" || q[0].Exactly == nil ||
		q[0].Exactly.DeviceClassName != draClassGPU || q[0].Exactly.Count != 2 {
		t.Errorf("claim %s: requests %+v, want container-0-request-2: 2 of class %s", claim.Name, q, draClassGPU)
	}
	var uuids []string
	for _, d := range claimDevices(claim) {
		uuids = append(uuids, dra.devices[d].uuid)
	}
	if claimNode(claim) != dra.name || len(uuids) != 2 || !reservedFor(claim, string(pod.UID)) {
		t.Fatalf("claim %s: allocated on %q to %v, reservedFor %+v", claim.Name, claimNode(claim), uuids, claim.Status.ReservedFor)
	}
	if !sameSet(a.GPUs, uuids) || a.DRA == nil || len(a.DRA.Devices) != 2 || a.DRA.Devices[0].Claim != ns+"/"+claim.Name ||
		a.DRA.Devices[0].Request != "container-0-request-2" {
		t.Errorf("pod legacy: allocation gpus %v dra %+v; its claim %s holds %v", a.GPUs, a.DRA, claim.Name, uuids)
	}

	podDP, aDP := r.waitBound(t, "legacy-dp")
	if podDP.Status.ExtendedResourceClaimStatus != nil {
		t.Errorf("pod legacy-dp on device-plugin node %s: extendedResourceClaimStatus %+v, want none", dp.name, podDP.Status.ExtendedResourceClaimStatus)
	}
	claims, err := r.c.Client.ResourceV1().ResourceClaims(ns).List(harness.Ctx(t, 30*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		for _, o := range c.OwnerReferences {
			if o.UID == podDP.UID {
				t.Errorf("claim %s made for pod legacy-dp on a device-plugin node", c.Name)
			}
		}
	}
	if len(aDP.GPUs) != 2 || aDP.DRA != nil {
		t.Errorf("pod legacy-dp: allocation gpus %v dra %+v; want two GPUs flextopo chose, no dra key", aDP.GPUs, aDP.DRA)
	}
	for _, g := range aDP.GPUs {
		if !dp.uuids[g] {
			t.Errorf("pod legacy-dp: GPU %s is not one of node %s", g, dp.name)
		}
	}
	r.deleteAndWaitFree(t, k, []string{"legacy", "legacy-dp"}, dra.name)
	// The garbage collector deletes the claim of the deleted pod.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := r.c.Client.ResourceV1().ResourceClaims(ns).Get(harness.Ctx(t, 10*time.Second), claim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim %s still there 60s after its pod was deleted (%v)", claim.Name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// draKind is a kind of random pod, with its weight.
type draKind struct {
	name   string // the pods' labelKind
	weight int
	spec   func(name string, rng *rand.Rand) draPodSpec
}

// draKinds is the random mix. Its guaranteed numa pods with more than one
// GPU take templates the webhook gives a numaNode constraint: without one,
// DRA's first fit may put the GPUs on two NUMA nodes while an aligned set is
// free, and flextopo's bind then refuses the pod at every try (measured:
// a nvidia.com/gpu: 2 numa pod retried bind for as long as it was watched).
// kube-scheduler makes a KEP-5004 claim itself, where no webhook annotation
// reaches, so guaranteed numa nvidia.com/gpu pods ask for one GPU.
func draKinds() []draKind {
	tmpl := func(t, cpu, mem string) func(string, *rand.Rand) draPodSpec {
		return func(n string, _ *rand.Rand) draPodSpec {
			return draPodSpec{name: n, template: t, cpu: cpu, memory: mem}
		}
	}
	numa := func(t string, gpus int) func(string, *rand.Rand) draPodSpec {
		return func(n string, _ *rand.Rand) draPodSpec {
			c := strconv.Itoa(2 * gpus)
			return draPodSpec{name: n, template: t, cpu: c, memory: c + "Gi", guaranteed: true, affinity: "numa"}
		}
	}
	ext := func(gpus int, guaranteed bool) func(string, *rand.Rand) draPodSpec {
		return func(n string, _ *rand.Rand) draPodSpec {
			ps := draPodSpec{name: n, gpus: gpus, cpu: "1", memory: "1Gi"}
			if guaranteed {
				ps.cpu, ps.memory, ps.guaranteed, ps.affinity = "2", "2Gi", true, "numa"
			}
			return ps
		}
	}
	return []draKind{
		{"gpu-1", 6, tmpl("gpu-1", "500m", "1Gi")},
		{"gpu-2", 3, tmpl("gpu-2", "1", "2Gi")},
		{"gpu-4", 1, tmpl("gpu-4", "2", "4Gi")},
		{"numa-1", 3, numa("numa-1", 1)},
		{"numa-2", 3, numa("numa-2", 2)},
		{"numa-4", 1, numa("numa-4", 4)},
		{"shared", 3, func(n string, rng *rand.Rand) draPodSpec {
			return draPodSpec{name: n, claim: fmt.Sprintf("shared-%d", rng.IntN(4)), cpu: "500m", memory: "512Mi"}
		}},
		{"nvidia.com/gpu-1", 3, ext(1, false)},
		{"nvidia.com/gpu-2", 2, ext(2, false)},
		{"nvidia.com/gpu-1-numa", 2, ext(1, true)},
		{"mig-1g.10gb", 2, tmpl("mig-1g10gb", "500m", "1Gi")},
		{"mig-3g.40gb", 1, tmpl("mig-3g40gb", "1", "2Gi")},
		{"cpu-only", 1, func(n string, _ *rand.Rand) draPodSpec { return draPodSpec{name: n, cpu: "500m", memory: "512Mi"} }},
	}
}

func pickKind(kinds []draKind, rng *rand.Rand) draKind {
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	x := rng.IntN(total)
	for _, k := range kinds {
		if x < k.weight {
			return k
		}
		x -= k.weight
	}
	return kinds[len(kinds)-1]
}

// randomized creates, schedules and deletes random pods in waves.
func (r *draRig) randomized(t *testing.T, k *draChecker, rng *rand.Rand, seed uint64) {
	total := envInt("FLEXTOPO_E2E_DRA_PODS", 300)
	// Pods alive after a wave's creations, about: their devices exceed
	// what the nodes have, so that some wait and claims are freed and
	// taken again all along.
	const target = 32
	kinds := draKinds()
	cx := harness.Ctx(t, 60*time.Minute)
	ns := r.s.ns
	start := time.Now()
	var live []string
	created, waves := 0, 0
	restarted := false
	for created < total && k.count() == 0 {
		waves++
		var del, keep []string
		for _, n := range live {
			if rng.Float64() < 0.3 {
				del = append(del, n)
			} else {
				keep = append(keep, n)
			}
		}
		live = keep
		if err := harness.Parallel(len(del), 8, func(i int) error { return r.deletePod(cx, ns, del[i]) }); err != nil {
			t.Fatal(err)
		}
		n := min(total-created, max(target-len(live), 0)+rng.IntN(5))
		names := make([]string, n)
		specs := make([]draPodSpec, n)
		for i := range names {
			names[i] = fmt.Sprintf("r-%04d", created+i)
			kind := pickKind(kinds, rng)
			specs[i] = kind.spec(names[i], rng)
			specs[i].pool = "random"
			specs[i].kind = kind.name
		}
		err := harness.Parallel(n, 8, func(i int) error {
			_, err := r.c.Client.CoreV1().Pods(ns).Create(cx, r.podObject(r.s, specs[i]), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("create pods: %v", err)
		}
		created += n
		live = append(live, names...)
		if err := r.waitPodsDecided(cx, ns, names, 2*time.Minute); err != nil {
			t.Fatalf("wave %d: %v", waves, err)
		}
		// Before the next wave deletes any: every pod bound by now is
		// checked at least once.
		k.round(cx, false)
		if !restarted && created >= total/2 {
			before := k.checkpoint(cx, t, fmt.Sprintf("wave %d, before the restart", waves))
			k.restart(cx, t, before)
			restarted = true
			live = r.livePods(t, "r-")
		} else if waves%10 == 0 {
			k.checkpoint(cx, t, fmt.Sprintf("wave %d", waves))
			live = r.livePods(t, "r-")
		}
	}
	k.checkpoint(cx, t, "after the last wave")
	live = r.livePods(t, "r-")
	elapsed := time.Since(start)
	// Everything deleted: every claim freed, in the API and in the model.
	if err := harness.Parallel(len(live), 8, func(i int) error { return r.deletePod(cx, ns, live[i]) }); err != nil {
		t.Fatal(err)
	}
	k.checkpoint(cx, t, "all pods deleted")
	claims, err := k.listClaims(cx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims {
		if c.Status.Allocation != nil {
			t.Errorf("claim %s/%s still allocated after every pod was deleted", c.Namespace, c.Name)
		}
	}
	t.Logf("randomized (seed %d): %d pods created in %d waves in %s (%.1f pods/s); %s",
		seed, created, waves, elapsed.Round(time.Second), float64(created)/elapsed.Seconds(), k.stats())
	if created < total {
		t.Errorf("stopped after %d of %d pods: invariants violated", created, total)
	}
	// Every kind was bound and checked, on the kind of node it can use.
	bound := k.boundKinds()
	t.Logf("bound pods checked, by kind and node: %v", bound)
	if created >= 200 {
		for _, kind := range kinds {
			want := []string{kind.name + " on DRA"}
			switch {
			case strings.HasPrefix(kind.name, "nvidia.com/gpu"):
				want = append(want, kind.name+" on device-plugin")
			case kind.name == "cpu-only":
				want = []string{}
			}
			for _, w := range want {
				if bound[w] == 0 {
					t.Errorf("no pod of kind %s was seen bound", w)
				}
			}
		}
	}
	k.failures(t)
}

// livePods lists the pods whose names start with prefix.
func (r *draRig) livePods(t *testing.T, prefix string) []string {
	t.Helper()
	pods, err := r.c.Client.CoreV1().Pods(r.s.ns).List(harness.Ctx(t, 30*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix) {
			out = append(out, p.Name)
		}
	}
	return out
}

// noVictims: a pod short of CPUs on a DRA node that also lacks an aligned
// GPU pair. kube-scheduler's own dry run frees the CPUs by evicting a
// CPU-only pod and finds the GPUs free for DRA (one on each NUMA node: the
// claim has no constraint); flextopo's preempt verb sees that the
// guaranteed numa placement needs GPUs that only evicting claim holders
// could free, which kube-scheduler v1.36 cannot do (KEP-5690), and drops the
// node: no victim is evicted. Then, as a control, an aligned pair is freed:
// the same eviction now gives an aligned placement, and flextopo lets it
// happen.
func (r *draRig) noVictims(t *testing.T, k *draChecker) {
	ns := r.s.ns
	node := r.nodes[r.s.nodeName("pre")]
	cx := harness.Ctx(t, 5*time.Minute)
	err := harness.CreatePriorityClasses(cx, r.c.Client, map[string]int32{"dra-hog": 5, "dra-low": 10, "dra-high": 1000}, nil,
		"flextopo e2e: DRA preemption")
	if err != nil {
		t.Fatal(err)
	}
	low := []string{}
	r.deleteAtEnd(t, "low-0", "low-1", "low-2", "low-3", "low-4", "low-5", "hog", "urgent")
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("low-%d", i)
		low = append(low, name)
		r.createPod(r.s, draPodSpec{name: name, template: "gpu-1", cpu: "1", memory: "1Gi", priority: "dra-low", node: node.name})
	}
	held := map[string]bool{}
	holder := map[string]string{} // device -> the low pod whose claim holds it
	for _, name := range low {
		pod, _ := r.waitBound(t, name)
		for _, cn := range podClaimNames(pod) {
			for _, d := range claimDevices(r.getClaim(t, ns, cn)) {
				held[d] = true
				holder[d] = name
			}
		}
	}
	if want := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-4", "gpu-5", "gpu-6"}; !sameSet(keys(held), want) {
		t.Fatalf("node %s: the low pods' claims hold %v, want %v (first fit in slice order)", node.name, keys(held), want)
	}
	// 6 + 120 of the node's 128 CPUs requested. hog ranks below the low
	// pods: kube-scheduler reprieves the more important pods first, and
	// these pods have no start time (no kubelet) to order equal priorities,
	// so with one priority it could as well evict four low pods as hog.
	r.createPod(r.s, draPodSpec{name: "hog", cpu: "120", memory: "1Gi", priority: "dra-hog", node: node.name})
	s := *r.s
	s.t = t
	s.waitBound("hog", false) // no devices: no allocation annotation
	r.createPod(r.s, draPodSpec{name: "urgent", template: "loose-2", cpu: "8", memory: "8Gi", guaranteed: true,
		affinity: "numa", priority: "dra-high", node: node.name})

	// The preempt verb drops the node, with an Event on the pod.
	var msg string
	deadline := time.Now().Add(90 * time.Second)
	for msg == "" {
		evs, err := r.c.Client.CoreV1().Events(ns).List(cx, metav1.ListOptions{FieldSelector: "involvedObject.name=urgent"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == "DRAPreemptionUnsupported" {
				msg = e.Message
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod urgent: no DRAPreemptionUnsupported event after 90s; events:\n%s", r.s.events(cx, "urgent"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.Contains(msg, "KEP-5690") {
		t.Errorf("pod urgent: event DRAPreemptionUnsupported %q does not name KEP-5690", msg)
	}
	var decisions struct {
		Decisions []struct {
			Verb string `json:"verb"`
			Pod  struct {
				Name string `json:"name"`
			} `json:"pod"`
			Nodes []struct {
				Node    string `json:"node"`
				Verdict string `json:"verdict"`
				Reason  string `json:"reason"`
			} `json:"nodes"`
		} `json:"decisions"`
	}
	if err := k.debugGet(cx, "/debug/decisions?limit=4096", &decisions); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range decisions.Decisions {
		if d.Verb != "preempt" || d.Pod.Name != "urgent" {
			continue
		}
		for _, row := range d.Nodes {
			if row.Node == node.name && row.Verdict == "dropped" && strings.Contains(row.Reason, "KEP-5690") {
				found = true
				t.Logf("preempt decision for urgent on %s: %s: %s", row.Node, row.Verdict, row.Reason)
			} else {
				t.Errorf("preempt decision for urgent: node %s %s (%s), want %s dropped for KEP-5690", row.Node, row.Verdict, row.Reason, node.name)
			}
		}
	}
	if !found {
		t.Errorf("/debug/decisions: no preempt decision dropping %s for urgent", node.name)
	}
	// Nothing is evicted and the pod waits.
	time.Sleep(pendingObserve)
	pod, err := r.c.Client.CoreV1().Pods(ns).Get(cx, "urgent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" || pod.Status.NominatedNodeName != "" {
		t.Errorf("pod urgent: node %q nominated %q, want neither", pod.Spec.NodeName, pod.Status.NominatedNodeName)
	}
	for _, name := range append(low, "hog") {
		p, err := r.c.Client.CoreV1().Pods(ns).Get(cx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s was evicted (%v, deletionTimestamp %v)", name, err, p.GetDeletionTimestamp())
		}
	}
	t.Logf("pod urgent stays pending: %s; flextopo's event: %s", podConditionText(pod), msg)

	// The control: the low pods holding gpu-0 and gpu-1 leave (which ones
	// depends on the order kube-scheduler bound them in), and NUMA node 0
	// has gpu-0, gpu-1 and gpu-3 free. Now evicting the CPU-only hog gives
	// urgent an aligned placement: flextopo keeps kube-scheduler's victim,
	// hog is evicted, and urgent binds with two GPUs of NUMA node 0 (DRA's
	// first fit: gpu-0 and gpu-1) and CPUs there.
	r.deleteAndWaitFree(t, k, []string{holder["gpu-0"], holder["gpu-1"]}, node.name)
	r.nudge(t, node.name)
	pod, a := r.waitBound(t, "urgent")
	// Evicted: gone, or still terminating (the node has no kubelet to
	// confirm the deletion, and the garbage collector may not have run).
	switch hog, err := r.c.Client.CoreV1().Pods(ns).Get(cx, "hog", metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Errorf("pod hog: %v", err)
	case hog.DeletionTimestamp == nil:
		t.Errorf("pod hog is not being deleted (%s); want it evicted for urgent", podConditionText(hog))
	}
	devs := claimDevices(r.getClaim(t, ns, podClaimNames(pod)[0]))
	if len(devs) != 2 || !slices.Contains([]string{"gpu-0", "gpu-1", "gpu-3"}, devs[0]) ||
		!slices.Contains([]string{"gpu-0", "gpu-1", "gpu-3"}, devs[1]) {
		t.Errorf("pod urgent: DRA allocated %v, want two of gpu-0, gpu-1, gpu-3 (NUMA node 0)", devs)
	}
	checkNUMAAllocation(t, "urgent", a, node.topo, 8, 2)
	if err := k.debugGet(cx, "/debug/decisions?limit=4096", &decisions); err != nil {
		t.Fatal(err)
	}
	kept := false
	for _, d := range decisions.Decisions {
		for _, row := range d.Nodes {
			kept = kept || (d.Verb == "preempt" && d.Pod.Name == "urgent" && row.Node == node.name && row.Verdict == "kept")
		}
	}
	if !kept {
		t.Errorf("/debug/decisions: no preempt decision keeping a victim on %s for urgent", node.name)
	}
	r.deleteAndWaitFree(t, k, []string{"urgent", "low-2", "low-3", "low-4", "low-5"}, node.name)
}
