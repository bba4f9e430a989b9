package e2e

// The Helm chart (charts/flextopo) against the real control plane:
//
//   - TestChartServerSideDryRun renders the chart in both modes (and with the
//     optional objects on) and applies every rendered object to
//     kube-apiserver with server-side apply in dry-run mode; it also checks
//     that every role a binding refers to exists, and lets helm itself do an
//     `install --dry-run=server` to check NOTES.txt.
//   - TestChartRBAC creates the rendered RBAC objects for real and asks the
//     API server (SubjectAccessReview) what the chart's service account may
//     and may not do, in both modes.
//   - TestChartSchedulesWithItsConfiguration runs flextopo-scheduler with
//     the files and command line the chart renders (scheduler mode), under
//     the chart's service account, and schedules a GPU pod through it with
//     schedulerName flextopo-scheduler.
//   - TestChartExtenderOverTLS runs the extender of extender mode with
//     tls.enabled: a CA and a serving certificate made by the test stand in
//     for the Secret, and the extender serves HTTPS for the name the
//     printed extenders[] entry verifies.
//
// HELM names the helm binary (scripts/chart-check.sh builds it and sets it
// with --e2e). Without HELM the tests skip, or fail when CI=true.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const (
	chartFieldManager = "flextopo-test"
	chartRelease      = "flextopo"
	chartSchedName    = "flextopo-scheduler"
	chartHelmTimeout  = 60 * time.Second
)

// chartEnv is what the chart tests share: helm, the API clients and the
// server's version (Capabilities.KubeVersion when rendering).
type chartEnv struct {
	t        *testing.T
	c        *harness.Cluster
	helm     string
	chartDir string
	kubeVer  string
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	helmHome string
}

func requireChart(t *testing.T) *chartEnv {
	t.Helper()
	c := requireCluster(t)
	helm := os.Getenv("HELM")
	if helm == "" {
		msg := "HELM is not set: run scripts/chart-check.sh --e2e, or set HELM to a helm v3 binary"
		if harness.IsCI() {
			t.Fatal(msg + " (CI=true: the chart tests are required)")
		}
		t.Skip(msg)
	}
	if !harness.IsExecutable(helm) {
		t.Fatalf("HELM=%s is not an executable file", helm)
	}
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	cfg := chartRESTConfig(c, c.PKI.Token)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	return &chartEnv{
		t: t, c: c, helm: helm, kubeVer: v.GitVersion, dyn: dyn, mapper: mapper,
		chartDir: filepath.Join(c.RepoRoot, "charts", "flextopo"),
		helmHome: t.TempDir(),
	}
}

func chartRESTConfig(c *harness.Cluster, token string) *rest.Config {
	return &rest.Config{
		Host:            c.APIURL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.PKI.CAPEM},
		QPS:             100,
		Burst:           200,
	}
}

// runHelm runs helm with its cache, config and data directories inside the
// test's temporary directory.
func (e *chartEnv) runHelm(args ...string) ([]byte, error) {
	cx, cancel := context.WithTimeout(context.Background(), chartHelmTimeout)
	defer cancel()
	cmd := exec.CommandContext(cx, e.helm, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(e.helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(e.helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(e.helmHome, "data"),
		"KUBECONFIG="+e.c.Kubeconfig,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// chartRender is one `helm template` output.
type chartRender struct {
	ns   string
	raw  []byte
	objs []*unstructured.Unstructured
}

func (e *chartEnv) render(ns string, sets ...string) *chartRender {
	e.t.Helper()
	args := []string{"template", chartRelease, e.chartDir, "--namespace", ns, "--kube-version", e.kubeVer}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	raw, err := e.runHelm(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	r := &chartRender{ns: ns, raw: raw}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var m map[string]interface{}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			e.t.Fatalf("decode rendered manifests: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		r.objs = append(r.objs, &unstructured.Unstructured{Object: m})
	}
	if len(r.objs) == 0 {
		e.t.Fatalf("helm template %v rendered nothing", sets)
	}
	return r
}

func chartObjName(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}

func (r *chartRender) kinds() []string {
	var ks []string
	for _, o := range r.objs {
		ks = append(ks, o.GetKind())
	}
	sort.Strings(ks)
	return ks
}

// one returns the only object of a kind whose name ends with suffix.
func (r *chartRender) one(t *testing.T, kind, suffix string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range r.objs {
		if o.GetKind() == kind && strings.HasSuffix(o.GetName(), suffix) {
			if found != nil {
				t.Fatalf("two %s objects named *%s", kind, suffix)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no %s named *%s among %v", kind, suffix, r.kinds())
	}
	return found
}

// resource maps an object to its API resource; namespaced objects must name
// their namespace (the chart sets it on every one).
func (e *chartEnv) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", chartObjName(o), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			return nil, fmt.Errorf("%s: namespaced but the chart sets no metadata.namespace", chartObjName(o))
		}
		return e.dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	if o.GetNamespace() != "" {
		return nil, fmt.Errorf("%s: cluster-scoped but has metadata.namespace", chartObjName(o))
	}
	return e.dyn.Resource(m.Resource), nil
}

// apply sends one object with server-side apply; dryRun leaves nothing
// behind.
func (e *chartEnv) apply(o *unstructured.Unstructured, dryRun bool) error {
	ri, err := e.resource(o)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: chartFieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ri.Apply(cx, o.GetName(), o, opts); err != nil {
		return fmt.Errorf("apply %s (dryRun=%v): %w", chartObjName(o), dryRun, err)
	}
	return nil
}

func (e *chartEnv) createNamespace(ns string) {
	e.t.Helper()
	cx := harness.Ctx(e.t, 30*time.Second)
	_, err := e.c.Client.CoreV1().Namespaces().Create(cx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatalf("create namespace %s: %v", ns, err)
	}
}

// applyForReal creates the objects (server-side apply) and deletes them when
// the test ends. No controller manager runs, so nothing acts on them.
func (e *chartEnv) applyForReal(objs []*unstructured.Unstructured) {
	e.t.Helper()
	for _, o := range objs {
		if err := e.apply(o, false); err != nil {
			e.t.Fatal(err)
		}
		o := o
		e.t.Cleanup(func() {
			ri, err := e.resource(o)
			if err != nil {
				return
			}
			cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := ri.Delete(cx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				e.t.Logf("cleanup: delete %s: %v", chartObjName(o), err)
			}
		})
	}
}

// checkRoleRefs checks that every role a binding refers to is rendered or
// exists: the API server accepts a binding to a missing role silently.
func (e *chartEnv) checkRoleRefs(t *testing.T, r *chartRender) {
	t.Helper()
	rendered := map[string]bool{}
	for _, o := range r.objs {
		rendered[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = true
	}
	for _, o := range r.objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		ns := ""
		if kind == "Role" {
			ns = o.GetNamespace()
		}
		if rendered[kind+"/"+ns+"/"+name] {
			continue
		}
		gvr := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: strings.ToLower(kind) + "s"}
		var ri dynamic.ResourceInterface = e.dyn.Resource(gvr)
		if ns != "" {
			ri = e.dyn.Resource(gvr).Namespace(ns)
		}
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := ri.Get(cx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			t.Errorf("%s refers to %s %q, which is neither rendered nor on the server: %v", chartObjName(o), kind, name, err)
		}
	}
}

// TestChartServerSideDryRun: every object the chart renders is accepted by
// kube-apiserver (server-side apply, dryRun=All), in both modes and with the
// optional objects on. The ServiceMonitor stays off: this API server has no
// Prometheus Operator CRDs.
func TestChartServerSideDryRun(t *testing.T) {
	e := requireChart(t)
	cases := []struct {
		name      string
		sets      []string
		wantKinds []string
		notes     []string // NOTES.txt must contain each
		// The node agent's objects, rendered unless noAgent; nil means
		// chartNodeAgentKinds.
		agentKinds []string
		noAgent    bool
	}{
		// Every case binds system:auth-delegator for flextopo's /metrics
		// (extender.metricsPort): one more ClusterRoleBinding. Scheduler
		// mode binds the plugin's role, system:kube-scheduler,
		// system:volume-scheduler and its events role too.
		{
			name:      "scheduler",
			sets:      []string{"mode=scheduler"},
			wantKinds: chartSchedulerKinds,
			notes:     []string{"schedulerName: " + chartSchedName, "runs flextopo-scheduler", "port-forward deployment/flextopo 8889"},
		},
		{
			name:      "extender",
			sets:      []string{"mode=extender"},
			wantKinds: []string{"ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service", "ServiceAccount"},
			notes:     []string{"urlPrefix: \"http://flextopo.chart-dry-extender.svc:8888\"", "nodeCacheCapable: true", "bindVerb: bind"},
		},
		{
			name: "scheduler-ha",
			sets: []string{"mode=scheduler", "replicaCount=2", "scheduler.extraArgs[0]=--kube-api-qps=50",
				"priorityClassName=system-cluster-critical", "scheduler.debugListenHost=0.0.0.0"},
			wantKinds: append([]string{"PodDisruptionBudget"}, chartSchedulerKinds...),
			notes:     []string{"no authentication, on the pod's addresses"},
		},
		{
			name:      "scheduler-dra",
			sets:      []string{"mode=scheduler", "gpuMode=dra"},
			wantKinds: chartSchedulerKinds,
		},
		{
			name:      "extender-tls",
			sets:      []string{"mode=extender", "tls.enabled=true", "tls.secretName=flextopo-tls", "tls.clientAuth.enabled=true"},
			wantKinds: []string{"ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service", "ServiceAccount"},
			notes: []string{"urlPrefix: \"https://flextopo.chart-dry-extender-tls.svc:8888\"", "enableHTTPS: true",
				"serverName: \"flextopo.chart-dry-extender-tls.svc\"", "caFile:", "certFile:", "keyFile:",
				"needs a client certificate"},
		},
		{
			name: "extender-pdb",
			sets: []string{"mode=extender", "podDisruptionBudget.enabled=true", "service.type=NodePort",
				"registration.managedResources[0].name=nvidia.com/gpu"},
			wantKinds: []string{"ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget",
				"Service", "ServiceAccount"},
			notes: []string{"managedResources:", "- name: \"nvidia.com/gpu\""},
		},
		{
			name:      "extender-no-node-agent",
			sets:      []string{"mode=extender", "nodeAgent.enabled=false"},
			wantKinds: []string{"ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service", "ServiceAccount"},
			noAgent:   true,
		},
		{
			name:       "scheduler-node-observe",
			sets:       []string{"mode=scheduler", "nodeAgent.mode=observe", "nodeAgent.restrictToOwnNode=false"},
			wantKinds:  chartSchedulerKinds,
			agentKinds: []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "ServiceAccount"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := "chart-dry-" + tc.name
			// Dry-run of a namespaced object needs its namespace to exist.
			e.createNamespace(ns)
			start := time.Now()
			r := e.render(ns, tc.sets...)
			want := append([]string(nil), tc.wantKinds...)
			if !tc.noAgent {
				agent := tc.agentKinds
				if agent == nil {
					agent = chartNodeAgentKinds
				}
				want = append(want, agent...)
			}
			sort.Strings(want)
			if got := r.kinds(); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("rendered kinds %v, want %v", got, want)
			}
			rejected := 0
			for _, o := range r.objs {
				if err := e.apply(o, true); err != nil {
					t.Error(err)
					rejected++
				}
			}
			// Dry run left nothing behind.
			dep := r.one(t, "Deployment", "")
			if ri, err := e.resource(dep); err == nil {
				cx := harness.Ctx(t, 10*time.Second)
				if _, err := ri.Get(cx, dep.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("after the dry run, get %s: %v, want NotFound", chartObjName(dep), err)
				}
			}
			e.checkRoleRefs(t, r)
			t.Logf("server-side dry run: %d of %d objects accepted in %s", len(r.objs)-rejected, len(r.objs), time.Since(start).Round(time.Millisecond))

			// helm's own server-side dry run: validation against the
			// server's OpenAPI, and NOTES.txt.
			args := []string{"install", chartRelease, e.chartDir, "--namespace", ns, "--dry-run=server"}
			for _, s := range tc.sets {
				args = append(args, "--set", s)
			}
			out, err := e.runHelm(args...)
			if err != nil {
				t.Fatal(err)
			}
			notes := string(out)
			if i := strings.Index(notes, "\nNOTES:\n"); i >= 0 {
				notes = notes[i:]
			} else {
				t.Fatalf("helm install --dry-run=server printed no NOTES:\n%s", out)
			}
			for _, want := range tc.notes {
				if !strings.Contains(notes, want) {
					t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
				}
			}
		})
	}
}

// chartSchedulerKinds are the objects of scheduler mode besides the node
// agent's: the plugin's and the events ClusterRoles and their bindings,
// system:kube-scheduler's, system:volume-scheduler's and
// system:auth-delegator's bindings, the two ConfigMaps, the Lease's Role
// and binding, the authentication reader's binding in kube-system.
var chartSchedulerKinds = []string{"ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ClusterRoleBinding",
	"ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap", "ConfigMap", "Deployment", "Role", "RoleBinding", "RoleBinding", "ServiceAccount"}

// chartNodeAgentKinds are the objects of the node agent (flextopo-node) in
// the chart's default values.
var chartNodeAgentKinds = []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "ServiceAccount",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

// workloadSA is the ServiceAccount the pods of a Deployment or DaemonSet run
// as.
func (r *chartRender) workloadSA(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	w := r.one(t, kind, "")
	name, _, _ := unstructured.NestedString(w.Object, "spec", "template", "spec", "serviceAccountName")
	for _, o := range r.objs {
		if o.GetKind() == "ServiceAccount" && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("%s runs as ServiceAccount %q, which the chart does not render", chartObjName(w), name)
	return nil
}

// chartSA is the identity of the service account of a Deployment or
// DaemonSet of the chart.
func chartSA(r *chartRender, t *testing.T, kind string) (user string, groups []string) {
	sa := r.workloadSA(t, kind)
	return "system:serviceaccount:" + sa.GetNamespace() + ":" + sa.GetName(),
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + sa.GetNamespace(), "system:authenticated"}
}

type chartAccess struct {
	allowed                         bool
	ns, verb, group, res, sub, name string
}

func (a chartAccess) String() string {
	r := a.res
	if a.sub != "" {
		r += "/" + a.sub
	}
	if a.group != "" {
		r += "." + a.group
	}
	if a.name != "" {
		r += " " + a.name
	}
	where := "cluster-wide"
	if a.ns != "" {
		where = "in " + a.ns
	}
	return fmt.Sprintf("%s %s %s", a.verb, r, where)
}

// checkAccess asks a SubjectAccessReview for each entry. The API server's
// RBAC authorizer learns new roles and bindings from its informers, a moment
// after they are created: an access that should be allowed is asked again
// for up to rbacSettle before it counts as denied. The first allowed entry
// should come first, so that the denials are asked once RBAC has caught up.
func (e *chartEnv) checkAccess(t *testing.T, user string, groups []string, want []chartAccess) {
	t.Helper()
	const rbacSettle = 5 * time.Second
	for _, a := range want {
		deadline := time.Now().Add(rbacSettle)
		for {
			sar := e.accessReview(t, user, groups, a)
			if sar.Status.Allowed == a.allowed {
				break
			}
			if !a.allowed || time.Now().After(deadline) {
				t.Errorf("%s may %s: allowed=%v, want %v (%s)", user, a, sar.Status.Allowed, a.allowed, sar.Status.Reason)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (e *chartEnv) accessReview(t *testing.T, user string, groups []string, a chartAccess) *authorizationv1.SubjectAccessReview {
	t.Helper()
	cx := harness.Ctx(t, 10*time.Second)
	sar, err := e.c.Client.AuthorizationV1().SubjectAccessReviews().Create(cx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.res, Subresource: a.sub, Name: a.name,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview %s: %v", a, err)
	}
	return sar
}

// TestChartRBAC creates the RBAC objects of each mode and checks, with
// SubjectAccessReviews, that the service account can do what the extender
// and kube-scheduler need and not more.
func TestChartRBAC(t *testing.T) {
	e := requireChart(t)
	const other = "chart-rbac-other"
	e.createNamespace(other)
	// What flextopo reads and writes in both modes.
	flextopoNeeds := func(podNS string) []chartAccess {
		return []chartAccess{
			{true, "", "list", "", "nodes", "", ""},
			{true, "", "watch", "", "nodes", "", ""},
			{true, "", "get", "", "nodes", "", "n1"},
			{true, "", "list", "", "pods", "", ""},
			{true, "", "watch", "", "pods", "", ""},
			{true, podNS, "get", "", "pods", "", "p"},
			{true, podNS, "create", "", "pods", "binding", "p"},
			{true, "", "list", "policy", "poddisruptionbudgets", "", ""},
			{true, "", "watch", "policy", "poddisruptionbudgets", "", ""},
			// Never needed in either mode.
			{false, podNS, "get", "", "secrets", "", "s"},
			{false, "", "list", "", "secrets", "", ""},
			{false, "", "update", "", "nodes", "", "n1"},
			{false, "", "delete", "", "nodes", "", "n1"},
			{false, podNS, "create", "", "pods", "", ""},
			{false, podNS, "update", "", "pods", "", "p"},
			{false, podNS, "patch", "apps", "deployments", "", "d"},
			{false, podNS, "create", "policy", "poddisruptionbudgets", "", ""},
		}
	}
	extenderNeeds := func(podNS string) []chartAccess {
		return append(flextopoNeeds(podNS),
			// bind writes the allocation annotation with a patch.
			chartAccess{true, podNS, "patch", "", "pods", "", "p"},
			// Allocation conflicts are reported on the pods.
			chartAccess{true, podNS, "create", "", "events", "", ""},
			// Gangs: the PodGroups of both APIs (docs/preemption.md).
			chartAccess{true, "", "list", "scheduling.k8s.io", "podgroups", "", ""},
			chartAccess{true, "", "watch", "scheduling.x-k8s.io", "podgroups", "", ""},
			// The extender's /metrics checks each scraper's token.
			chartAccess{true, "", "create", "authentication.k8s.io", "tokenreviews", "", ""},
			chartAccess{true, "", "create", "authorization.k8s.io", "subjectaccessreviews", "", ""},
		)
	}
	t.Run("extender", func(t *testing.T) {
		ns := "chart-rbac-extender"
		e.createNamespace(ns)
		r := e.render(ns, "mode=extender")
		e.applyForReal(chartRBACObjects(r))
		user, groups := chartSA(r, t, "Deployment")
		want := append(extenderNeeds(other),
			// The extender alone elects no leader, changes no events
			// and deletes no pods.
			chartAccess{false, ns, "create", "coordination.k8s.io", "leases", "", ""},
			chartAccess{false, other, "patch", "", "events", "", "e"},
			chartAccess{false, other, "delete", "", "pods", "", "p"},
			chartAccess{false, "kube-system", "get", "", "configmaps", "", "extension-apiserver-authentication"},
		)
		e.checkAccess(t, user, groups, want)
	})
	t.Run("scheduler", func(t *testing.T) {
		ns := "chart-rbac-scheduler"
		e.createNamespace(ns)
		r := e.render(ns, "mode=scheduler", "gpuMode=dra")
		e.applyForReal(chartRBACObjects(r))
		user, groups := chartSA(r, t, "Deployment")
		lease := r.one(t, "Deployment", "").GetName()
		want := append(flextopoNeeds(other),
			// The plugin puts the annotation in the Binding: no pod
			// patch.
			chartAccess{false, other, "patch", "", "pods", "", "p"},
			// DRA (gpuMode dra): the slices, claims and classes.
			chartAccess{true, "", "list", "resource.k8s.io", "resourceslices", "", ""},
			chartAccess{true, "", "watch", "resource.k8s.io", "deviceclasses", "", ""},
			chartAccess{true, other, "get", "resource.k8s.io", "resourceclaims", "", "c"},
			// Leader election on the release's own Lease.
			chartAccess{true, ns, "create", "coordination.k8s.io", "leases", "", ""},
			chartAccess{true, ns, "get", "coordination.k8s.io", "leases", "", lease},
			chartAccess{true, ns, "update", "coordination.k8s.io", "leases", "", lease},
			chartAccess{false, ns, "update", "coordination.k8s.io", "leases", "", "someone-elses-lease"},
			chartAccess{false, ns, "delete", "coordination.k8s.io", "leases", "", lease},
			// Events in any namespace, both APIs.
			chartAccess{true, other, "create", "", "events", "", ""},
			chartAccess{true, other, "patch", "", "events", "", "e"},
			chartAccess{true, other, "create", "events.k8s.io", "events", "", ""},
			chartAccess{true, other, "patch", "events.k8s.io", "events", "", "e"},
			// Delegated authentication of the secure port.
			chartAccess{true, "kube-system", "get", "", "configmaps", "", "extension-apiserver-authentication"},
			chartAccess{false, "kube-system", "get", "", "configmaps", "", "kube-proxy"},
			// What kube-scheduler does (system:kube-scheduler,
			// system:volume-scheduler).
			chartAccess{true, other, "delete", "", "pods", "", "victim"},
			chartAccess{true, other, "patch", "", "pods", "status", "p"},
			chartAccess{true, "", "list", "", "persistentvolumeclaims", "", ""},
			chartAccess{true, "", "update", "", "persistentvolumes", "", "pv"},
			chartAccess{true, "", "list", "storage.k8s.io", "csinodes", "", ""},
			chartAccess{true, "", "create", "authentication.k8s.io", "tokenreviews", "", ""},
			chartAccess{true, "", "create", "authorization.k8s.io", "subjectaccessreviews", "", ""},
		)
		e.checkAccess(t, user, groups, want)
	})
}

func chartRBACObjects(r *chartRender) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			out = append(out, o)
		}
	}
	return out
}

// chartContainer is a container of the rendered Deployment.
func chartContainer(t *testing.T, dep *unstructured.Unstructured, name string) map[string]interface{} {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		m, _ := c.(map[string]interface{})
		if m["name"] == name {
			return m
		}
	}
	t.Fatalf("%s has no container %q", chartObjName(dep), name)
	return nil
}

// chartMountedFile returns the ConfigMap entry a container sees at file:
// it follows the volumeMount, the volume and the ConfigMap, so the test also
// checks the Deployment's wiring.
func chartMountedFile(t *testing.T, r *chartRender, dep *unstructured.Unstructured, ctr map[string]interface{}, file string) string {
	t.Helper()
	mounts, _, _ := unstructured.NestedSlice(ctr, "volumeMounts")
	volName := ""
	for _, m := range mounts {
		mm, _ := m.(map[string]interface{})
		if mm["mountPath"] == path.Dir(file) {
			volName, _ = mm["name"].(string)
		}
	}
	if volName == "" {
		t.Fatalf("container %s: nothing mounted at %s", ctr["name"], path.Dir(file))
	}
	vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	cmName := ""
	for _, v := range vols {
		vm, _ := v.(map[string]interface{})
		if vm["name"] == volName {
			cmName, _, _ = unstructured.NestedString(vm, "configMap", "name")
		}
	}
	if cmName == "" {
		t.Fatalf("volume %s is not a ConfigMap volume", volName)
	}
	cm := r.one(t, "ConfigMap", cmName)
	data, found, _ := unstructured.NestedString(cm.Object, "data", path.Base(file))
	if !found {
		t.Fatalf("ConfigMap %s has no key %s (mounted at %s)", cmName, path.Base(file), file)
	}
	return data
}

// chartArgs is a container's command and args.
func chartArgs(ctr map[string]interface{}) []string {
	cmd, _, _ := unstructured.NestedStringSlice(ctr, "command")
	args, _, _ := unstructured.NestedStringSlice(ctr, "args")
	return append(cmd, args...)
}

// chartKubeconfig writes a kubeconfig that authenticates with token.
func (e *chartEnv) chartKubeconfig(dir, token string) string {
	e.t.Helper()
	kc := map[string]interface{}{
		"apiVersion":      "v1",
		"kind":            "Config",
		"current-context": "chart",
		"clusters": []interface{}{map[string]interface{}{"name": "e2e", "cluster": map[string]interface{}{
			"server": e.c.APIURL, "certificate-authority-data": base64.StdEncoding.EncodeToString(e.c.PKI.CAPEM),
		}}},
		"contexts": []interface{}{map[string]interface{}{"name": "chart", "context": map[string]interface{}{
			"cluster": "e2e", "user": "sa",
		}}},
		"users": []interface{}{map[string]interface{}{"name": "sa", "user": map[string]interface{}{"token": token}}},
	}
	b, err := yaml.Marshal(kc)
	if err != nil {
		e.t.Fatal(err)
	}
	p := filepath.Join(dir, "sa.kubeconfig")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// chartSecretFile returns the Secret and the key in it that a container
// sees at file: it follows the volumeMount and the Secret volume's items, so
// the test also checks the Deployment's wiring of the TLS files.
func chartSecretFile(t *testing.T, dep *unstructured.Unstructured, ctr map[string]interface{}, file string) (secret, key string) {
	t.Helper()
	mounts, _, _ := unstructured.NestedSlice(ctr, "volumeMounts")
	volName := ""
	for _, m := range mounts {
		mm, _ := m.(map[string]interface{})
		if mm["mountPath"] == path.Dir(file) {
			volName, _ = mm["name"].(string)
		}
	}
	if volName == "" {
		t.Fatalf("container %s: nothing mounted at %s", ctr["name"], path.Dir(file))
	}
	vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	for _, v := range vols {
		vm, _ := v.(map[string]interface{})
		if vm["name"] != volName {
			continue
		}
		secret, _, _ = unstructured.NestedString(vm, "secret", "secretName")
		if secret == "" {
			t.Fatalf("volume %s (mounted at %s in %s) is not a Secret volume", volName, path.Dir(file), ctr["name"])
		}
		items, found, _ := unstructured.NestedSlice(vm, "secret", "items")
		if !found {
			return secret, path.Base(file)
		}
		for _, it := range items {
			im, _ := it.(map[string]interface{})
			if im["path"] == path.Base(file) {
				k, _ := im["key"].(string)
				return secret, k
			}
		}
		t.Fatalf("volume %s of Secret %s has no item at %s", volName, secret, path.Base(file))
	}
	t.Fatalf("no volume %s", volName)
	return "", ""
}

// chartTLSSecret is what a kubernetes.io/tls Secret made by cert-manager
// holds: a CA, and a serving certificate for serverName that it signed,
// with an ECDSA key in SEC 1 form ("EC PRIVATE KEY", cert-manager's form).
// Written under dir/<secret>/<key>, where the test points the rewritten
// paths.
type chartTLSSecret struct {
	name  string
	dir   string
	data  map[string][]byte
	caPEM []byte
}

func newChartTLSSecret(t *testing.T, dir, name, serverName string) *chartTLSSecret {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flextopo-chart-e2e-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: serverName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{serverName},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	s := &chartTLSSecret{name: name, dir: filepath.Join(dir, name), data: map[string][]byte{
		"ca.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}}
	s.caPEM = s.data["ca.crt"]
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range s.data {
		if err := os.WriteFile(filepath.Join(s.dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// localPath maps a file the rendered pod sees (a Secret mount) to the test's
// copy of it, checking that it comes from this Secret.
func (s *chartTLSSecret) localPath(t *testing.T, dep *unstructured.Unstructured, ctr map[string]interface{}, file string) string {
	t.Helper()
	secret, key := chartSecretFile(t, dep, ctr, file)
	if secret != s.name {
		t.Fatalf("container %s reads %s from Secret %s, want %s", ctr["name"], file, secret, s.name)
	}
	if _, ok := s.data[key]; !ok {
		t.Fatalf("container %s reads %s from key %q of Secret %s, which a kubernetes.io/tls Secret does not have", ctr["name"], file, key, secret)
	}
	return filepath.Join(s.dir, key)
}

// TestChartSchedulesWithItsConfiguration runs what the chart's scheduler
// mode runs, on loopback and under the chart's service account:
// flextopo-scheduler with the rendered KubeSchedulerConfiguration and its
// container's flags (leader election on, through the rendered Lease), the
// FlexTopo plugin reading the rendered flextopo.yaml it finds through
// pluginConfig's configFile and the Deployment's mounts, and the rendered
// exec readiness probe. flextopo's /metrics (extender.metricsPort) is
// scraped over HTTPS with a token, as the ServiceMonitor scrapes it. Then a
// pod with schedulerName flextopo-scheduler is scheduled and bound through
// it.
func TestChartSchedulesWithItsConfiguration(t *testing.T) {
	e := requireChart(t)
	c := e.c
	ns, id := "chart-run", "chart"
	r, dep, dir, kubeconfig := e.chartRun(t, ns, "mode=scheduler")

	// Nodes first, so that the plugin's first lists hold them.
	s := newScenario(t, c, id)
	schedBin := harness.SchedulerBinary(c.RepoRoot)
	haveScheduler := harness.IsExecutable(schedBin)
	var nvlink, pcie string
	if haveScheduler {
		pb := newTopo(s.nodeName("pcie"))
		pb.switchGPUs(pb.numa(pb.socket(), "0-31", 262144), 8)
		pcie = s.addTopologyNode("pcie", pb.build())
		nb := newTopo(s.nodeName("nvlink"))
		g := nb.switchGPUs(nb.numa(nb.socket(), "0-15", 65536), 2)
		nb.nvlink(g[0], g[1], 4)
		nvlink = s.addTopologyNode("nvlink", nb.build())
	}

	// --- the one container: flextopo-scheduler ---
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Errorf("%s has %d containers, want flextopo-scheduler alone", chartObjName(dep), len(cs))
	}
	schedCtr := chartContainer(t, dep, "flextopo-scheduler")
	if img, _ := schedCtr["image"].(string); !strings.HasPrefix(img, "flextopo/scheduler:") {
		t.Errorf("flextopo-scheduler container image %q, want flextopo/scheduler", img)
	}
	schedArgs := chartArgs(schedCtr)
	if len(schedArgs) < 2 || schedArgs[0] != "flextopo-scheduler" {
		t.Fatalf("flextopo-scheduler container runs %v", schedArgs)
	}
	var cfgRaw string
	for i, a := range schedArgs {
		if strings.HasPrefix(a, "--config=") {
			cfgRaw = chartMountedFile(t, r, dep, schedCtr, strings.TrimPrefix(a, "--config="))
			schedArgs[i] = "--config=" + filepath.Join(dir, "scheduler-config.yaml")
		}
	}
	if cfgRaw == "" {
		t.Fatalf("flextopo-scheduler container has no --config= flag: %v", schedArgs)
	}
	var cfg map[string]interface{}
	if err := yaml.Unmarshal([]byte(cfgRaw), &cfg); err != nil {
		t.Fatalf("rendered KubeSchedulerConfiguration: %v", err)
	}
	if cfg["extenders"] != nil {
		t.Errorf("extenders %v in scheduler mode, want none", cfg["extenders"])
	}
	le, _ := cfg["leaderElection"].(map[string]interface{})
	if le["leaderElect"] != true || le["resourceNamespace"] != ns || le["resourceName"] != dep.GetName() {
		t.Errorf("leaderElection %v: want leaderElect true on Lease %s/%s", le, ns, dep.GetName())
	}
	profiles, _ := cfg["profiles"].([]interface{})
	if len(profiles) != 1 {
		t.Fatalf("profiles %v, want one", profiles)
	}
	prof := profiles[0].(map[string]interface{})
	if prof["schedulerName"] != chartSchedName {
		t.Errorf("profile %v, want schedulerName %s", prof["schedulerName"], chartSchedName)
	}
	enabled, _, _ := unstructured.NestedSlice(prof, "plugins", "multiPoint", "enabled")
	if len(enabled) != 1 || enabled[0].(map[string]interface{})["name"] != "FlexTopo" {
		t.Errorf("plugins.multiPoint.enabled %v, want FlexTopo", enabled)
	}
	pcs, _ := prof["pluginConfig"].([]interface{})
	var args map[string]interface{}
	for _, pc := range pcs {
		if m, _ := pc.(map[string]interface{}); m["name"] == "FlexTopo" {
			args, _ = m["args"].(map[string]interface{})
		}
	}
	configFile, _ := args["configFile"].(string)
	if configFile == "" {
		t.Fatalf("pluginConfig %v: no FlexTopo configFile", pcs)
	}

	// flextopo.yaml as the plugin finds it: the file configFile names in
	// the container. Its debug and metrics listeners move to free ports
	// here, and the metrics listener's token reviews go through the test's
	// kubeconfig of the chart's account instead of the in-cluster one.
	ftRaw := chartMountedFile(t, r, dep, schedCtr, configFile)
	var ft map[string]interface{}
	if err := yaml.Unmarshal([]byte(ftRaw), &ft); err != nil {
		t.Fatalf("rendered flextopo.yaml: %v", err)
	}
	const debugRendered = "127.0.0.1:8889"
	if ft["debugListen"] != debugRendered {
		t.Fatalf("rendered flextopo.yaml: debugListen %v, want %s", ft["debugListen"], debugRendered)
	}
	debugPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if ft["kubeconfig"] != "" {
		t.Errorf("rendered flextopo.yaml: kubeconfig %v, want \"\" (the in-cluster account)", ft["kubeconfig"])
	}
	if p, _, _ := unstructured.NestedSlice(schedCtr, "ports"); !chartHasPort(p, "metrics", 10262) {
		t.Errorf("flextopo-scheduler container ports %v lack metrics: 10262", p)
	}
	ftRun, metricsPort := chartMetricsListener(t, ftRaw)
	ftRun = chartSetKey(t, chartSetKey(t, ftRun, "debugListen", harness.HostPort(debugPort)), "kubeconfig", kubeconfig)
	ftPath := filepath.Join(dir, "flextopo.yaml")
	if err := os.WriteFile(ftPath, []byte(ftRun), 0o600); err != nil {
		t.Fatal(err)
	}
	// Only what ties it to the pod changes: the account and the files.
	args["configFile"] = ftPath
	cc, _ := cfg["clientConnection"].(map[string]interface{})
	if cc == nil {
		t.Fatalf("no clientConnection in %s", cfgRaw)
	}
	cc["kubeconfig"] = kubeconfig
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scheduler-config.yaml"), out, 0o600); err != nil {
		t.Fatal(err)
	}
	if !haveScheduler {
		if harness.IsCI() {
			t.Fatalf("flextopo-scheduler binary %s not found", schedBin)
		}
		t.Skipf("no flextopo-scheduler at %s (scripts/build-scheduler.sh builds it): checked the rendered configuration only", schedBin)
	}

	schedPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	runArgs := append(schedArgs[1:],
		fmt.Sprintf("--secure-port=%d", schedPort), // after the chart's: the last one wins
		"--bind-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "certs"),
		// In a pod both default to the in-cluster account.
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
	)
	sched := harness.TestProcess(t, "chart-flextopo-scheduler", dir, schedBin, runArgs...)
	// The liveness probe: kube-scheduler's HTTPS /healthz on the secure port.
	lp, _, _ := unstructured.NestedString(schedCtr, "livenessProbe", "httpGet", "path")
	probeScheme, _, _ := unstructured.NestedString(schedCtr, "livenessProbe", "httpGet", "scheme")
	if lp != "/healthz" || probeScheme != "HTTPS" {
		t.Errorf("liveness probe %s %s, want HTTPS /healthz", probeScheme, lp)
	}
	if err := harness.WaitHTTP(sched, harness.HTTPClient(nil), "https://"+harness.HostPort(schedPort)+"/healthz", nil, 90*time.Second, func(code int, _ string) bool {
		return code == 200
	}); err != nil {
		t.Fatalf("flextopo-scheduler with the chart's configuration: %v", err)
	}
	if err := harness.WaitHTTP(sched, harness.HTTPClient(nil), "http://"+harness.HostPort(debugPort)+"/readyz", nil, 60*time.Second, func(code int, _ string) bool {
		return code == 200
	}); err != nil {
		t.Fatalf("flextopo's model under the chart's account: %v", err)
	}
	// The rendered exec readiness probe, pointed at this port, passes;
	// pointed at a port nobody listens on, it fails.
	probeFrom := "/dev/tcp/" + strings.Replace(debugRendered, ":", "/", 1)
	closed, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		port int
		pass bool
	}{{debugPort, true}, {closed, false}} {
		cmd, found, _ := unstructured.NestedStringSlice(schedCtr, "readinessProbe", "exec", "command")
		if !found || len(cmd) == 0 {
			t.Fatalf("readiness probe: no exec command")
		}
		rewritten := false
		for i := range cmd {
			rewritten = rewritten || strings.Contains(cmd[i], probeFrom+" ")
			cmd[i] = strings.ReplaceAll(cmd[i], probeFrom+" ", fmt.Sprintf("/dev/tcp/127.0.0.1/%d ", tc.port))
		}
		if !rewritten {
			t.Fatalf("readiness probe %q does not call %s", cmd, probeFrom)
		}
		pcx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pout, err := exec.CommandContext(pcx, cmd[0], cmd[1:]...).CombinedOutput()
		cancel()
		if (err == nil) != tc.pass {
			t.Errorf("readiness probe on port %d: error %v (%s), want pass=%v", tc.port, err, pout, tc.pass)
		}
	}

	// flextopo's /metrics, as the ServiceMonitor scrapes it: the chart's
	// account has the scraper's token reviewed (system:auth-delegator).
	chartCheckMetrics(t, metricsPort, e.c.PKI.Token)

	chartWaitLease(t, c, sched, ns, dep.GetName())

	// A GPU pod for the chart's scheduler: only it may place it (the
	// e2e's default-scheduler ignores other scheduler names).
	q := *resource.NewQuantity(2, resource.DecimalSI)
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "via-chart", Namespace: s.ns, Annotations: map[string]string{
			flextopo.AnnAffinity: "nvlink", flextopo.AnnAffinityMode: "guaranteed",
		}},
		Spec: corev1.PodSpec{
			SchedulerName:                 chartSchedName,
			NodeSelector:                  map[string]string{labelTest: s.id},
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "main", Image: harness.PauseImage,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), flextopo.ResGPU: q},
					Limits:   corev1.ResourceList{flextopo.ResGPU: q},
				},
			}},
		},
	}
	pcx := harness.Ctx(t, 30*time.Second)
	if _, err := c.Client.CoreV1().Pods(s.ns).Create(pcx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	got, a := s.waitScheduled("via-chart")
	if got.Spec.NodeName != nvlink {
		t.Errorf("pod via-chart landed on %s, want %s (the NVLink pair; %s has only unlinked GPUs)", got.Spec.NodeName, nvlink, pcie)
	}
	if a.Level != "nvlink" || len(a.GPUs) != 2 {
		t.Errorf("allocation %+v, want 2 GPUs at level nvlink", a)
	}
	if err := sched.CheckAlive(); err != nil {
		t.Fatal(err)
	}
}

// chartRun renders the chart into namespace ns (also the name of the
// test's directory), creates its RBAC objects, and writes a kubeconfig with
// a token of the Deployment's service account, as the pod would have it.
func (e *chartEnv) chartRun(t *testing.T, ns string, sets ...string) (r *chartRender, dep *unstructured.Unstructured, dir, kubeconfig string) {
	t.Helper()
	e.createNamespace(ns)
	r = e.render(ns, sets...)
	e.applyForReal(chartRBACObjects(r))
	dep = r.one(t, "Deployment", "")
	sa := r.workloadSA(t, "Deployment")
	dir, err := e.c.Dir(ns)
	if err != nil {
		t.Fatal(err)
	}
	cx := harness.Ctx(t, 30*time.Second)
	expiry := int64(3600)
	tr, err := e.c.Client.CoreV1().ServiceAccounts(ns).CreateToken(cx, sa.GetName(), &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", chartObjName(sa), err)
	}
	return r, dep, dir, e.chartKubeconfig(dir, tr.Status.Token)
}

// chartWaitLease waits until the scheduler takes the Lease through the
// chart's Role (create) and renews it (get, update) every retryPeriod.
func chartWaitLease(t *testing.T, c *harness.Cluster, sched *harness.Process, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var firstRenew *metav1.MicroTime
	for {
		lcx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lease, err := c.Client.CoordinationV1().Leases(ns).Get(lcx, name, metav1.GetOptions{})
		cancel()
		if err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" && lease.Spec.RenewTime != nil {
			if firstRenew == nil {
				firstRenew = lease.Spec.RenewTime
				t.Logf("Lease %s/%s taken by %s", ns, lease.Name, *lease.Spec.HolderIdentity)
			} else if !lease.Spec.RenewTime.Equal(firstRenew) {
				t.Logf("Lease %s/%s renewed at %s", ns, lease.Name, lease.Spec.RenewTime.Format(time.RFC3339Nano))
				return
			}
		}
		if err := sched.CheckAlive(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler did not take and renew Lease %s/%s within 60s (taken: %v, last error: %v)",
				ns, name, firstRenew != nil, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestChartExtenderOverTLS runs the extender of extender mode with
// tls.enabled and client certificates off, as rendered: its flextopo.yaml
// (followed through the Deployment's mounts, the key pair through its
// Secret volume, a CA and certificate made by the test standing in for the
// Secret) and its container's arguments, under the chart's service
// account. It serves HTTPS for the name NOTES.txt's extenders[] entry
// verifies (HTTP/1.1 to a client that offers h2), refuses plain HTTP and
// other names, and serves /metrics to a reviewed token.
func TestChartExtenderOverTLS(t *testing.T) {
	e := requireChart(t)
	c := e.c
	ns := "chart-ext-tls"
	r, dep, dir, kubeconfig := e.chartRun(t, ns, "mode=extender", "tls.enabled=true", "tls.secretName=flextopo-tls")
	extBin := harness.ExtenderBinary(c.RepoRoot)
	if !harness.IsExecutable(extBin) {
		if harness.IsCI() {
			t.Fatalf("extender binary %s not found", extBin)
		}
		t.Skipf("no extender binary at %s", extBin)
	}
	extCtr := chartContainer(t, dep, "extender")
	extArgs := chartArgs(extCtr)
	if len(extArgs) < 3 || path.Base(extArgs[0]) != "flextopo-extender" {
		t.Fatalf("extender container runs %v, want flextopo-extender --config FILE", extArgs)
	}
	serverName := dep.GetName() + "." + ns + ".svc"
	secret := newChartTLSSecret(t, dir, "flextopo-tls", serverName)
	extPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metricsPort := 0
	for i := 1; i < len(extArgs); i++ {
		if extArgs[i] != "--config" || i+1 >= len(extArgs) {
			continue
		}
		raw := chartMountedFile(t, r, dep, extCtr, extArgs[i+1])
		var m map[string]interface{}
		if err := yaml.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("rendered flextopo.yaml: %v", err)
		}
		if m["listen"] != "0.0.0.0:8888" || m["kubeconfig"] != "" || m["snapshot"] != "" {
			t.Errorf("rendered flextopo.yaml: listen %v, kubeconfig %q, snapshot %q; want 0.0.0.0:8888 and in-cluster watch",
				m["listen"], m["kubeconfig"], m["snapshot"])
		}
		cfg := chartTLSExtenderConfig(t, raw, m, secret, dep, extCtr)
		cfg, metricsPort = chartMetricsListener(t, cfg)
		p := filepath.Join(dir, "flextopo.yaml")
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		extArgs[i+1] = p
	}
	// The file as rendered; the in-cluster account and the fixed port are
	// replaced by flags (which override the file).
	args := append(extArgs[1:], "--kubeconfig", kubeconfig, "--listen", harness.HostPort(extPort))
	ext := harness.TestProcess(t, "chart-extender", dir, extBin, args...)
	extURL := "https://" + harness.HostPort(extPort)
	client := chartTLSClient(secret.caPEM, serverName)
	if err := harness.WaitHTTP(ext, client, extURL+"/readyz", nil, 60*time.Second, func(code int, _ string) bool {
		return code == 200
	}); err != nil {
		t.Fatalf("extender with the chart's flextopo.yaml: %v", err)
	}
	chartCheckTLSExtender(t, client, extURL, extPort)
	chartCheckMetrics(t, metricsPort, e.c.PKI.Token)
}

// chartMetricsListener checks that the rendered flextopo.yaml serves
// flextopo's /metrics on every address of the pod (metricsListen), in the
// extender or in flextopo-scheduler, and moves it to a free port here.
func chartMetricsListener(t *testing.T, cfg string) (string, int) {
	t.Helper()
	var m map[string]interface{}
	if err := yaml.Unmarshal([]byte(cfg), &m); err != nil {
		t.Fatalf("flextopo.yaml: %v", err)
	}
	if m["metricsListen"] != "0.0.0.0:10262" {
		t.Fatalf("rendered flextopo.yaml: metricsListen %v, want 0.0.0.0:10262", m["metricsListen"])
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return chartSetKey(t, cfg, "metricsListen", harness.HostPort(port)), port
}

// chartCheckMetrics scrapes flextopo's /metrics as the chart's
// ServiceMonitor does: HTTPS without verifying the self-made certificate
// and a bearer token, which the extender or flextopo-scheduler (under the
// chart's service account) has the API server review. No token is refused; the cluster admin's gets
// the metrics, flextopo_ready among them.
func chartCheckMetrics(t *testing.T, port int, token string) {
	t.Helper()
	url := "https://" + harness.HostPort(port) + "/metrics"
	client := harness.HTTPClient(nil)
	for _, tc := range []struct {
		token string
		code  int
		want  string
	}{{"", 401, "unauthorized: a bearer token is required"}, {token, 200, "flextopo_ready 1"}} {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("scrape %s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("scrape %s (token %v): HTTP %d %.200s; want %d with %q", url, tc.token != "", resp.StatusCode, body, tc.code, tc.want)
		}
	}
}

// chartTLSExtenderConfig checks the TLS part of the rendered flextopo.yaml
// (extender mode, no client certificates) and points it at the test's
// files. It returns the configuration to run.
func chartTLSExtenderConfig(t *testing.T, raw string, m map[string]interface{}, secret *chartTLSSecret, dep *unstructured.Unstructured, extCtr map[string]interface{}) string {
	t.Helper()
	certFile, _ := m["tlsCertFile"].(string)
	keyFile, _ := m["tlsKeyFile"].(string)
	if certFile == "" || keyFile == "" || m["tlsClientCAFile"] != "" {
		t.Fatalf("rendered flextopo.yaml: tlsCertFile %q, tlsKeyFile %q, tlsClientCAFile %q; want a key pair and no client CA",
			m["tlsCertFile"], m["tlsKeyFile"], m["tlsClientCAFile"])
	}
	cert, key := secret.localPath(t, dep, extCtr, certFile), secret.localPath(t, dep, extCtr, keyFile)
	if filepath.Base(cert) != "tls.crt" || filepath.Base(key) != "tls.key" {
		t.Errorf("the extender reads %s and %s of the Secret, want tls.crt and tls.key", cert, key)
	}
	if m["debugListen"] != "" {
		t.Errorf("rendered flextopo.yaml: debugListen %q, want off", m["debugListen"])
	}
	return chartSetKey(t, chartSetKey(t, raw, "tlsCertFile", cert), "tlsKeyFile", key)
}

// chartHasPort reports whether a container's ports include `name` on
// containerPort `port`.
func chartHasPort(ports []interface{}, name string, port int64) bool {
	for _, p := range ports {
		m, _ := p.(map[string]interface{})
		// A float64: render decodes the manifests with encoding/json.
		if m["name"] == name && m["containerPort"] == float64(port) {
			return true
		}
	}
	return false
}

// chartSetKey sets a top-level string key of a rendered flextopo.yaml in
// its text. A YAML round trip would not do: it reads "dra: off" as a
// boolean (YAML 1.1), which flextopo's configuration refuses.
func chartSetKey(t *testing.T, cfg, key, value string) string {
	t.Helper()
	lines := strings.Split(cfg, "\n")
	found := false
	for i, l := range lines {
		if strings.HasPrefix(l, key+":") {
			lines[i] = fmt.Sprintf("%s: %q", key, value)
			found = true
		}
	}
	if !found {
		t.Fatalf("flextopo.yaml has no key %s:\n%s", key, cfg)
	}
	return strings.Join(lines, "\n")
}

// chartTLSClient trusts only caPEM, checks the certificate for serverName
// and, like kube-scheduler's transport, offers h2 by ALPN.
func chartTLSClient(caPEM []byte, serverName string) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}}
}

// chartCheckTLSExtender: the extender answers HTTP/1.1 inside TLS to a
// client that offers h2, refuses plain HTTP, and a client that checks
// another name refuses it.
func chartCheckTLSExtender(t *testing.T, client *http.Client, extURL string, extPort int) {
	t.Helper()
	resp, err := client.Get(extURL + "/healthz")
	if err != nil {
		t.Fatalf("GET %s/healthz over TLS: %v", extURL, err)
	}
	resp.Body.Close()
	if resp.TLS == nil {
		t.Fatalf("GET %s/healthz: no TLS connection state", extURL)
	}
	if resp.Proto != "HTTP/1.1" || resp.TLS.NegotiatedProtocol == "h2" {
		t.Errorf("GET /healthz: %s, ALPN %q; want HTTP/1.1 (no h2)", resp.Proto, resp.TLS.NegotiatedProtocol)
	}
	t.Logf("extender over TLS: %s, %s, ALPN %q", resp.Proto, tls.VersionName(resp.TLS.Version), resp.TLS.NegotiatedProtocol)
	if resp, err := harness.HTTPClient(nil).Get("http://" + harness.HostPort(extPort) + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("plain HTTP to the TLS port answered %s", resp.Status)
	}
	other := client.Transport.(*http.Transport).Clone()
	other.TLSClientConfig.ServerName = "someone-else.example.com"
	if resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: other}).Get(extURL + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("a client checking another server name accepted the extender's certificate")
	}
}
