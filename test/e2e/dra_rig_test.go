package e2e

// The DRA rig of dra_test.go: a control plane of its own with
// kube-controller-manager (the resourceclaim controller and the garbage
// collector), flextopo's extender with its admission webhook, and
// kube-scheduler registered with the extender as the chart's gpuMode dra
// registers it (no managedResources, so pods with only ResourceClaims reach
// every verb). Nodes are plain Node objects with a flextopo.io/topology
// annotation; a DRA node's GPUs are published in a ResourceSlice of the
// exact shape NVIDIA's driver writes (test/fixtures/dra), a device-plugin
// node advertises nvidia.com/gpu instead. No kubelet runs: bound pods never
// start, and are deleted with grace period 0.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const (
	draClassGPU = "gpu.nvidia.com" // deviceclass-gpu.json, extendedResourceName nvidia.com/gpu
	draClassMIG = "mig.nvidia.com" // deviceclass-mig.json
	attrNUMA    = "resource.kubernetes.io/numaNode"
	// annExtendedClaim marks the claim kube-scheduler makes for a pod's
	// extended resources on a node without device-plugin GPUs (KEP-5004,
	// pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go).
	annExtendedClaim = "resource.kubernetes.io/extended-resource-claim"
	// claimRequest is the request name of the rig's claims and templates.
	claimRequest = "gpu"
	// podClaim is the pod's name for its claim (spec.resourceClaims[].name).
	podClaim = "gpus"
)

// draDevice is one device a DRA node publishes, as the rig wrote it.
type draDevice struct {
	name string
	kind string // "gpu" or "mig"
	uuid string
	numa int
}

// draNode is a node of the rig and what it publishes.
type draNode struct {
	name    string
	dra     bool // its GPUs are in a ResourceSlice (else: device plugin)
	topo    *flextopo.Topology
	devices map[string]draDevice // by device name (DRA nodes)
	uuids   map[string]bool      // every GPU and MIG uuid of its topology
}

// draRig is the cluster of dra_test.go.
type draRig struct {
	t     *testing.T
	c     *harness.Cluster
	s     *scenario
	ext   *draExtender
	nodes map[string]*draNode
}

// draExtender is flextopo-extender on fixed ports, so that kube-scheduler's
// registration and the webhook's still reach it after a restart.
type draExtender struct {
	c                            *harness.Cluster
	dir, cfg                     string
	url, debugURL                string
	port, debugPort, webhookPort int
	proc                         *harness.Process
	starts                       int
	client                       *http.Client
}

// newDRARig starts the rig's control plane and components, and creates the
// DeviceClasses of NVIDIA's chart and the scenario's namespace.
func newDRARig(t *testing.T, id string) *draRig {
	t.Helper()
	c := privateControlPlane(t, "dra-"+id)
	r := &draRig{t: t, c: c, nodes: map[string]*draNode{}}
	r.s = newScenario(t, c, id)
	// The resourceclaim controller makes template claims and deallocates
	// claims whose pods are gone; the garbage collector deletes the claims
	// of deleted pods (owner references) and the slices of deleted nodes.
	if err := c.StartControllerManager([]string{"resourceclaim-controller", "garbage-collector-controller"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"deviceclass-gpu.json", "deviceclass-mig.json"} {
		var dc resourceapi.DeviceClass
		r.fixture(f, &dc)
		cx := harness.Ctx(t, 30*time.Second)
		if _, err := c.Client.ResourceV1().DeviceClasses().Create(cx, &dc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create DeviceClass from %s: %v", f, err)
		}
	}
	r.logFeatureGates()
	r.ext = r.newExtender()
	r.ext.start(t)
	r.registerWebhook("flextopo-dra-alignment", r.ext.webhookPort, r.s.ns)
	err := c.StartScheduler(r.ext.port, func(cfg map[string]interface{}) error {
		// The chart's gpuMode dra: every pod reaches the extender.
		ext0 := cfg["extenders"].([]interface{})[0].(map[string]interface{})
		delete(ext0, "managedResources")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*harness.Process{c.ControllerManager, c.Scheduler, r.ext.proc} {
				if p != nil {
					t.Logf("%s log (%s):\n%s", p.Name, p.LogPath, harness.TailFile(p.LogPath, 80))
				}
			}
		}
	})
	return r
}

// logFeatureGates logs kube-apiserver's DRA feature gates (its
// kubernetes_feature_enabled metric) and requires DRAExtendedResource: the
// rig runs v1.36's defaults, where it is beta and on
// (pkg/features/kube_features.go).
func (r *draRig) logFeatureGates() {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.c.APIURL+"/metrics", nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.c.PKI.Token)
	resp, err := harness.HTTPClient(r.c.PKI.CAPEM).Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	var gates []string
	on := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, `kubernetes_feature_enabled{name="DRA`) ||
			strings.HasPrefix(line, `kubernetes_feature_enabled{name="DynamicResourceAllocation"`) {
			gates = append(gates, strings.TrimPrefix(line, "kubernetes_feature_enabled"))
			on = on || (strings.Contains(line, `name="DRAExtendedResource"`) && strings.HasSuffix(line, " 1"))
		}
	}
	r.t.Logf("kube-apiserver DRA feature gates: %s", strings.Join(gates, " "))
	if !on {
		r.t.Fatalf("kube-apiserver: DRAExtendedResource is not on (v1.36's default)")
	}
}

// fixture decodes test/fixtures/dra/<name> into out.
func (r *draRig) fixture(name string, out interface{}) {
	r.t.Helper()
	raw, err := os.ReadFile(filepath.Join(r.c.RepoRoot, "test", "fixtures", "dra", name))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
}

func (r *draRig) newExtender() *draExtender {
	r.t.Helper()
	dir, err := r.c.Dir("flextopo-extender")
	if err != nil {
		r.t.Fatal(err)
	}
	e := &draExtender{c: r.c, dir: dir, client: &http.Client{Timeout: 10 * time.Second}}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = harness.FreePort(); err != nil {
			r.t.Fatal(err)
		}
	}
	e.port, e.debugPort, e.webhookPort = ports[0], ports[1], ports[2]
	e.url = "http://" + harness.HostPort(e.port)
	e.debugURL = "http://" + harness.HostPort(e.debugPort)
	certFile, keyFile := r.c.PKI.ServingCert()
	raw, err := yaml.Marshal(map[string]interface{}{
		"kubeconfig": r.c.Kubeconfig, "listen": harness.HostPort(e.port), "debugListen": harness.HostPort(e.debugPort),
		"logLevel": "info", "fragmentationWindow": 0, "dra": "on", "draDriver": draDriver,
		"webhookListen": harness.HostPort(e.webhookPort), "webhookCertFile": certFile, "webhookKeyFile": keyFile,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	e.cfg = filepath.Join(dir, "flextopo.yaml")
	if err := os.WriteFile(e.cfg, raw, 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { e.proc.Stop(15 * time.Second) })
	return e
}

// start starts the extender (again) and waits until it is ready: its
// informers have listed everything.
func (e *draExtender) start(t *testing.T) {
	t.Helper()
	e.starts++
	name := fmt.Sprintf("flextopo-extender-%d", e.starts)
	p, err := harness.StartProcess("flextopo-extender", filepath.Join(e.dir, name+".log"), harness.ExtenderBinary(e.c.RepoRoot),
		"--config", e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.proc = p
	e.c.Extender = p
	err = harness.WaitHTTP(p, e.client, e.url+"/readyz", nil, 60*time.Second, func(code int, _ string) bool { return code == 200 })
	if err != nil {
		t.Fatal(err)
	}
}

// kill ends the extender with SIGKILL, as a crash would (Stop then only
// closes its log).
func (e *draExtender) kill() {
	e.proc.Kill()
	e.proc.Stop(0)
}

// registerWebhook registers, as `name`, the admission webhook served on
// `port` (the extender's, or flextopo-scheduler's) for namespace `ns`, as
// the chart's webhook.yaml does, but with failurePolicy Fail: a claim the
// webhook did not see is an error here.
func (r *draRig) registerWebhook(name string, port int, ns string) {
	r.t.Helper()
	url := "https://" + harness.HostPort(port) + "/mutate"
	fail := admissionv1.Fail
	none := admissionv1.SideEffectClassNone
	ifNeeded := admissionv1.IfNeededReinvocationPolicy
	timeout := int32(5)
	scope := admissionv1.NamespacedScope
	cfg := &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionv1.MutatingWebhook{{
			Name:                    "dra-alignment.flextopo.io",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			ReinvocationPolicy:      &ifNeeded,
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &url, CABundle: r.c.PKI.CAPEM},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				"kubernetes.io/metadata.name": ns,
			}},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{"resource.k8s.io"}, APIVersions: []string{"v1"},
					Resources: []string{"resourceclaims", "resourceclaimtemplates"}, Scope: &scope},
			}},
		}},
	}
	cx := harness.Ctx(r.t, 30*time.Second)
	if _, err := r.c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(cx, cfg, metav1.CreateOptions{}); err != nil {
		r.t.Fatalf("register the webhook: %v", err)
	}
	r.waitWebhook(ns)
}

// waitWebhook returns once kube-apiserver calls the webhook for ns.
// kube-apiserver reads webhook configurations through an informer, so a
// template created just after the configuration could still miss it (seen
// once in a cold CI run). A dry-run template is created until it comes back
// with the constraint the webhook adds.
func (r *draRig) waitWebhook(ns string) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cx := harness.Ctx(r.t, 10*time.Second)
		tmpl, err := r.c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(cx, &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe"},
			Spec: resourceapi.ResourceClaimTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: alignedNUMA},
				Spec: claimSpec(draClassGPU, 2, "")},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && hasNUMAConstraint(&tmpl.Spec.Spec) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the webhook of %s does not mutate a template after 30 s (last: %v)", ns, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nodeTopology is an example topology (api/examples) with uuids of its own
// for the node: GPU-<node>-<index> and MIG-<node>-<gpu>-<start>. It returns
// the annotation's JSON, parsed, and the map from the example's uuids.
func (r *draRig) nodeTopology(example, node string) (string, *flextopo.Topology, map[string]string) {
	r.t.Helper()
	raw, err := os.ReadFile(filepath.Join(r.c.RepoRoot, "api", "examples", example))
	if err != nil {
		r.t.Fatal(err)
	}
	var t flextopo.Topology
	if err := json.Unmarshal(raw, &t); err != nil {
		r.t.Fatalf("%s: %v", example, err)
	}
	renamed := map[string]string{}
	flextopo.ForEachGPU(&t, func(_ int, g *flextopo.GPU) {
		renamed[g.UUID] = flextopo.GPUUUID(node, g.Index)
		if g.MIG != nil {
			for _, m := range g.MIG.Instances {
				renamed[m.UUID] = flextopo.MIGUUID(node, g.Index, m.Start)
			}
		}
	})
	text := string(raw)
	for from, to := range renamed {
		text = strings.ReplaceAll(text, from, to)
	}
	var out flextopo.Topology
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		r.t.Fatal(err)
	}
	return text, &out, renamed
}

// addDRANode creates a node of the example topology without device-plugin
// GPUs and publishes its GPUs in a ResourceSlice made from the fixture
// slice of that hardware: driver gpu.nvidia.com, one pool named after the
// node, the node as owner, uuids renamed as in the topology. order, when not
// nil, gives the devices' order in the slice (the driver's own order is that
// of a Go map); DRA's allocator takes devices first-fit in slice order.
func (r *draRig) addDRANode(short, example, sliceFixture string, order func(names []string) []string,
	labels map[string]string) *draNode {
	r.t.Helper()
	name := r.s.nodeName(short)
	text, topo, renamed := r.nodeTopology(example, name)
	r.s.addLabelledNode(short, text, topo.CPUCount(), topo.MemoryMiB(), 0, nil, labels)
	r.s.topos[name] = topo
	n := &draNode{name: name, dra: true, topo: topo, devices: map[string]draDevice{}, uuids: map[string]bool{}}
	for _, u := range renamed {
		n.uuids[u] = true
	}

	var slice resourceapi.ResourceSlice
	r.fixture(sliceFixture, &slice)
	cx := harness.Ctx(r.t, 30*time.Second)
	node, err := r.c.Client.CoreV1().Nodes().Get(cx, name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	// As the driver's kubelet plugin publishes it (resourceslicecontroller.go).
	slice.ObjectMeta = metav1.ObjectMeta{
		GenerateName: "00000-" + draDriver + "-" + name + "-",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: node.UID,
			Controller: ptrTo(true)}},
	}
	slice.Spec.NodeName = &name
	slice.Spec.Pool.Name = name
	byName := map[string]resourceapi.Device{}
	var names []string
	for _, d := range slice.Spec.Devices {
		for _, key := range []resourceapi.QualifiedName{"uuid", "parentUUID"} {
			if a, ok := d.Attributes[key]; ok && a.StringValue != nil {
				v, known := renamed[*a.StringValue]
				if !known {
					r.t.Fatalf("%s: device %s: %s %s is not in %s", sliceFixture, d.Name, key, *a.StringValue, example)
				}
				a.StringValue = &v
				d.Attributes[key] = a
			}
		}
		dev := draDevice{name: d.Name, kind: *d.Attributes["type"].StringValue, uuid: *d.Attributes["uuid"].StringValue, numa: -1}
		if a, ok := d.Attributes[attrNUMA]; ok && a.IntValue != nil {
			dev.numa = int(*a.IntValue)
		}
		n.devices[d.Name] = dev
		byName[d.Name] = d
		names = append(names, d.Name)
	}
	if order != nil {
		names = order(names)
	}
	slice.Spec.Devices = slice.Spec.Devices[:0]
	for _, dn := range names {
		slice.Spec.Devices = append(slice.Spec.Devices, byName[dn])
	}
	if _, err := r.c.Client.ResourceV1().ResourceSlices().Create(cx, &slice, metav1.CreateOptions{}); err != nil {
		r.t.Fatalf("create the ResourceSlice of %s: %v", name, err)
	}
	r.nodes[name] = n
	return n
}

// addDevicePluginNode creates a node of the example topology that
// advertises its GPUs as nvidia.com/gpu and publishes no ResourceSlice.
func (r *draRig) addDevicePluginNode(short, example string, labels map[string]string) *draNode {
	r.t.Helper()
	name := r.s.nodeName(short)
	text, topo, renamed := r.nodeTopology(example, name)
	r.s.addLabelledNode(short, text, topo.CPUCount(), topo.MemoryMiB(), 0, topo.DeviceCapacity(), labels)
	r.s.topos[name] = topo
	n := &draNode{name: name, topo: topo, uuids: map[string]bool{}}
	for _, u := range renamed {
		n.uuids[u] = true
	}
	r.nodes[name] = n
	return n
}

// shuffled returns an order function that shuffles the devices with rng.
func shuffled(rng *rand.Rand) func([]string) []string {
	return func(names []string) []string {
		out := append([]string(nil), names...)
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
}

func ptrTo[T any](v T) *T { return &v }

// claimSpec asks `count` devices of class, with an optional CEL selector.
func claimSpec(class string, count int, cel string) resourceapi.ResourceClaimSpec {
	req := resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount,
		Count: int64(count)}
	if cel != "" {
		req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: cel}}}
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
		{Name: claimRequest, Exactly: &req}}}}
}

// alignedNUMA are the claim annotations of flextopo's guaranteed numa
// affinity: the webhook turns them into a matchAttribute constraint on
// resource.kubernetes.io/numaNode.
var alignedNUMA = map[string]string{flextopo.AnnAffinity: "numa", flextopo.AnnAffinityMode: "guaranteed"}

// createTemplate creates a ResourceClaimTemplate; annotations go on the
// claims it makes (spec.metadata), where the webhook reads them.
func (r *draRig) createTemplate(ns, name string, spec resourceapi.ResourceClaimSpec, annotations map[string]string) *resourceapi.ResourceClaimTemplate {
	r.t.Helper()
	cx := harness.Ctx(r.t, 30*time.Second)
	tmpl, err := r.c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(cx, &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourceapi.ResourceClaimTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: spec},
	}, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatalf("create ResourceClaimTemplate %s/%s: %v", ns, name, err)
	}
	return tmpl
}

// createClaim creates a ResourceClaim that pods share by name.
func (r *draRig) createClaim(ns, name string, spec resourceapi.ResourceClaimSpec) {
	r.t.Helper()
	cx := harness.Ctx(r.t, 30*time.Second)
	_, err := r.c.Client.ResourceV1().ResourceClaims(ns).Create(cx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatalf("create ResourceClaim %s/%s: %v", ns, name, err)
	}
}

// draPodSpec is a pod of the DRA scenarios: one container, its devices
// from a claim template, a shared claim or the nvidia.com/gpu resource.
type draPodSpec struct {
	name       string
	template   string // spec.resourceClaims[].resourceClaimTemplateName
	claim      string // spec.resourceClaims[].resourceClaimName
	gpus       int    // nvidia.com/gpu
	cpu        string
	memory     string
	guaranteed bool   // limits = requests: Guaranteed QoS
	affinity   string // flextopo.io/affinity (mode guaranteed when set)
	priority   string // spec.priorityClassName
	node       string // kubernetes.io/hostname selector; "" = any node of the test
	pool       string // labelPool selector; "" = any
	kind       string // labelKind (the random pods' kind)
}

// labelKind names a random pod's kind (dra_test.go, draKinds).
const labelKind = "e2e.flextopo.io/kind"

func (r *draRig) podObject(s *scenario, ps draPodSpec) *corev1.Pod {
	req := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(ps.cpu),
		corev1.ResourceMemory: resource.MustParse(ps.memory),
	}
	if ps.gpus > 0 {
		req[flextopo.ResGPU] = *resource.NewQuantity(int64(ps.gpus), resource.DecimalSI)
	}
	lim := corev1.ResourceList{}
	if ps.guaranteed {
		lim = req.DeepCopy()
	} else if ps.gpus > 0 {
		lim[flextopo.ResGPU] = req[flextopo.ResGPU]
	}
	ann := map[string]string{}
	if ps.affinity != "" {
		ann[flextopo.AnnAffinity] = ps.affinity
		ann[flextopo.AnnAffinityMode] = "guaranteed"
	}
	selector := map[string]string{labelTest: s.id}
	if ps.node != "" {
		selector["kubernetes.io/hostname"] = ps.node
	}
	if ps.pool != "" {
		selector[labelPool] = ps.pool
	}
	zero := int64(0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: ps.name, Namespace: s.ns, Annotations: ann},
		Spec: corev1.PodSpec{
			NodeSelector:                  selector,
			PriorityClassName:             ps.priority,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "main", Image: harness.PauseImage,
				Resources: corev1.ResourceRequirements{Requests: req, Limits: lim},
			}},
		},
	}
	if ps.kind != "" {
		// A label value allows no "/".
		p.Labels = map[string]string{labelKind: strings.ReplaceAll(ps.kind, "/", "_")}
	}
	if ps.template != "" || ps.claim != "" {
		pc := corev1.PodResourceClaim{Name: podClaim}
		if ps.template != "" {
			pc.ResourceClaimTemplateName = &ps.template
		} else {
			pc.ResourceClaimName = &ps.claim
		}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{pc}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: podClaim}}
	}
	return p
}

func (r *draRig) createPod(s *scenario, ps draPodSpec) *corev1.Pod {
	r.t.Helper()
	cx := harness.Ctx(r.t, 30*time.Second)
	p, err := r.c.Client.CoreV1().Pods(s.ns).Create(cx, r.podObject(s, ps), metav1.CreateOptions{})
	if err != nil {
		r.t.Fatalf("create pod %s/%s: %v", s.ns, ps.name, err)
	}
	return p
}

// deletePod deletes a pod at once (grace period 0: no kubelet runs it).
func (r *draRig) deletePod(cx context.Context, ns, name string) error {
	zero := int64(0)
	err := r.c.Client.CoreV1().Pods(ns).Delete(cx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// podClaimNames are the ResourceClaims a pod uses: named in its spec, made
// from its templates (status.resourceClaimStatuses) and made by
// kube-scheduler for its extended resources
// (status.extendedResourceClaimStatus).
func podClaimNames(p *corev1.Pod) []string {
	var names []string
	for _, c := range p.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			names = append(names, *c.ResourceClaimName)
		}
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			names = append(names, *s.ResourceClaimName)
		}
	}
	if e := p.Status.ExtendedResourceClaimStatus; e != nil && e.ResourceClaimName != "" {
		names = append(names, e.ResourceClaimName)
	}
	sort.Strings(names)
	return names
}

// claimNode is the node of a claim's allocation (its nodeSelector's
// metadata.name), "" when it is not allocated to one node.
func claimNode(c *resourceapi.ResourceClaim) string {
	a := c.Status.Allocation
	if a == nil || a.NodeSelector == nil {
		return ""
	}
	for _, term := range a.NodeSelector.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// reservedFor says whether the claim is reserved for the pod.
func reservedFor(c *resourceapi.ResourceClaim, uid string) bool {
	for _, ref := range c.Status.ReservedFor {
		if ref.Resource == "pods" && string(ref.UID) == uid {
			return true
		}
	}
	return false
}

// draAllocationAnn is flextopo.io/allocation with its dra key
// (api/allocation.schema.json), as the node agent reads it.
type draAllocationAnn = flextopo.Allocation

// parseDRAAllocation decodes and validates the annotation as the node agent
// does (flextopo.dev/node/alloc).
func parseDRAAllocation(raw string) (*draAllocationAnn, error) {
	return flextopo.ParseAllocation(raw)
}
