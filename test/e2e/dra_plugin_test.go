package e2e

// The Plugin subtest of TestDRA: the DRA cluster through flextopo-scheduler
// (scheduler/: kube-scheduler with flextopo's framework plugins over the
// same C core) instead of the extender. Its model is fed by kube-scheduler's
// own informers (ResourceSlices, ResourceClaims, DeviceClasses); its own
// admission webhook, registered for a namespace of its own, makes a
// template's NUMA constraint; kube-scheduler's DynamicResources plugin picks
// the devices. Guaranteed numa pods on one DRA node must get the GPUs of
// their claims, on one NUMA node each, and CPUs on that NUMA node that no
// other pod holds. The plugin's model must show the claims holding the GPUs
// and the pods their CPUs. Then flextopo-scheduler is killed (SIGKILL) and
// started again: its model, rebuilt from the informers' lists, must show
// the same holdings, and two more pods must get units none of the first
// two holds. When the pods go, the model frees everything. The extender of
// the rig watches the same cluster, so the invariants of
// dra_check_test.go hold for these pods too.

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

// pluginDRANode is the short name of the rig's node for the Plugin subtest.
const pluginDRANode = "plg"

// startDRAPlugin starts a flextopo-scheduler, as `name`, with DRA on and
// its webhook on `port`, or skips (fails in CI) without the binary.
func (r *draRig) startDRAPlugin(t *testing.T, name string, port int) *harness.PluginScheduler {
	t.Helper()
	bin := pluginSchedulerBinary(t, r.c)
	certFile, keyFile := r.c.PKI.ServingCert()
	return r.c.StartPluginScheduler(t, name, bin, pluginSchedulerName, map[string]interface{}{
		"fragmentationWindow": 0, "dra": "on", "draDriver": draDriver,
		"webhookListen": harness.HostPort(port), "webhookCertFile": certFile, "webhookKeyFile": keyFile,
	}, nil)
}

// pluginHoldings is the plugin's /debug/nodes/<node> holdings.
func pluginHoldings(t *testing.T, ps *harness.PluginScheduler, node string) []holding {
	t.Helper()
	resp, err := harness.HTTPClient(nil).Get(ps.DebugURL + "/debug/nodes/" + node)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("flextopo-scheduler /debug/nodes/%s: HTTP %d", node, resp.StatusCode)
	}
	var detail struct {
		Holdings []holding `json:"holdings"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&detail); err != nil {
		t.Fatalf("flextopo-scheduler /debug/nodes/%s: %v", node, err)
	}
	return detail.Holdings
}

// waitPluginHoldings polls the plugin's holdings of the node until ok
// accepts them.
func waitPluginHoldings(t *testing.T, ps *harness.PluginScheduler, node, what string, ok func([]holding) bool) {
	t.Helper()
	deadline := time.Now().Add(draLag)
	for {
		h := pluginHoldings(t, ps, node)
		if ok(h) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: %s not in flextopo-scheduler's model after %s; holdings %+v", node, what, draLag, h)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pluginPinned is what one pod of the subtest got.
type pluginPinned struct {
	name, claim string
	gpus        []string // uuids of its claim's devices
	alloc       *draAllocationAnn
}

func (r *draRig) pluginFrontEnd(t *testing.T) {
	webhookPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ps := r.startDRAPlugin(t, "flextopo-scheduler-dra", webhookPort)
	s := *r.s
	s.t = t
	s.ns = r.s.ns + "-plugin"
	cx := harness.Ctx(t, 2*time.Minute)
	_, err = r.c.Client.CoreV1().Namespaces().Create(cx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}},
		metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	r.registerWebhook("flextopo-dra-alignment-plugin", webhookPort, s.ns)
	tmpl := r.createTemplate(s.ns, "numa-2", claimSpec(draClassGPU, 2, ""), alignedNUMA)
	if !hasNUMAConstraint(&tmpl.Spec.Spec) {
		t.Errorf("template %s/numa-2: constraints %+v; flextopo-scheduler's webhook should have added matchAttribute %s",
			s.ns, tmpl.Spec.Spec.Devices.Constraints, attrNUMA)
	}
	node := r.nodes[r.s.nodeName(pluginDRANode)]
	names := []string{"plugin-a", "plugin-b", "plugin-c", "plugin-d"}
	t.Cleanup(func() {
		for _, name := range names {
			if err := r.deletePod(harness.Ctx(t, 30*time.Second), s.ns, name); err != nil {
				t.Log(err)
			}
		}
	})
	got := r.pluginPods(t, &s, node, names[:2])
	waitPluginHoldings(t, ps, node.name, "the claims and pods", holdsAll(node, got))

	// A crash: the next flextopo-scheduler knows only what the informers
	// list, the allocation annotations and the claims.
	ps.Proc.Kill()
	ps.Proc.Stop(0)
	ps = r.startDRAPlugin(t, "flextopo-scheduler-dra-2", webhookPort)
	waitPluginHoldings(t, ps, node.name, "the claims and pods after a restart", holdsAll(node, got))
	got = append(got, r.pluginPods(t, &s, node, names[2:])...)
	for i := range got {
		for j := i + 1; j < len(got); j++ {
			checkDisjoint(t, got[i], got[j])
		}
	}
	waitPluginHoldings(t, ps, node.name, "the claims and pods", holdsAll(node, got))
	for _, name := range names {
		if err := r.deletePod(cx, s.ns, name); err != nil {
			t.Fatal(err)
		}
	}
	waitPluginHoldings(t, ps, node.name, "nothing held", func(hs []holding) bool { return len(hs) == 0 })
}

// pluginPods creates the pods, guaranteed numa pods of the numa-2
// template on node through flextopo-scheduler, and checks what each got.
func (r *draRig) pluginPods(t *testing.T, s *scenario, node *draNode, names []string) []pluginPinned {
	t.Helper()
	cx := harness.Ctx(t, 30*time.Second)
	for _, name := range names {
		p := r.podObject(s, draPodSpec{name: name, template: "numa-2", cpu: "8", memory: "16Gi", guaranteed: true,
			affinity: "numa", node: node.name})
		p.Spec.SchedulerName = pluginSchedulerName
		if _, err := r.c.Client.CoreV1().Pods(s.ns).Create(cx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s/%s: %v", s.ns, name, err)
		}
	}
	var got []pluginPinned
	for _, name := range names {
		got = append(got, r.pluginPinnedPod(t, s, node, name))
	}
	return got
}

// checkDisjoint fails when two pods hold a CPU or a GPU both.
func checkDisjoint(t *testing.T, a, b pluginPinned) {
	t.Helper()
	cpusA, _ := flextopo.ParseCPUList(a.alloc.CPUSet)
	cpusB, _ := flextopo.ParseCPUList(b.alloc.CPUSet)
	for cpu := range cpusA {
		if cpusB[cpu] {
			t.Errorf("pods %s and %s both hold CPU %d (%s, %s)", a.name, b.name, cpu, a.alloc.CPUSet, b.alloc.CPUSet)
		}
	}
	for _, g := range a.gpus {
		if slices.Contains(b.gpus, g) {
			t.Errorf("claims %s and %s both hold GPU %s", a.claim, b.claim, g)
		}
	}
}

// holdsAll accepts a node's holdings where each claim holds its GPUs and
// each pod its CPUs alone.
func holdsAll(node *draNode, got []pluginPinned) func([]holding) bool {
	return func(hs []holding) bool {
		for _, g := range got {
			c, p := findHolding(hs, g.claim, true), findHolding(hs, g.name, false)
			if c == nil || p == nil || !slices.Equal(c.GPUs, gpuIndexes(node, g.gpus)) || len(p.GPUs) != 0 ||
				p.CPUs != g.alloc.CPUSet {
				return false
			}
		}
		return true
	}
}

// pluginPinnedPod waits until the pod is bound to node and checks what it
// got (checkPinnedClaim).
func (r *draRig) pluginPinnedPod(t *testing.T, s *scenario, node *draNode, name string) pluginPinned {
	t.Helper()
	pod := s.waitBound(name, true)
	a, err := parseDRAAllocation(pod.Annotations[flextopo.AnnAllocation])
	if err != nil {
		t.Fatalf("pod %s: allocation: %v", name, err)
	}
	t.Logf("pod %s -> %s: %s", name, pod.Spec.NodeName, pod.Annotations[flextopo.AnnAllocation])
	claims := podClaimNames(pod)
	if pod.Spec.NodeName != node.name || len(claims) != 1 {
		t.Fatalf("pod %s: on %q with claims %v, want %s and its template's one claim", name, pod.Spec.NodeName, claims, node.name)
	}
	claim := r.getClaim(t, s.ns, claims[0])
	if !hasNUMAConstraint(&claim.Spec) {
		t.Errorf("claim %s: constraints %+v, want matchAttribute %s", claim.Name, claim.Spec.Devices.Constraints, attrNUMA)
	}
	uuids := checkPinnedClaim(t, s.ns, name, node, claim, a)
	return pluginPinned{name: name, claim: claim.Name, gpus: uuids, alloc: a}
}
