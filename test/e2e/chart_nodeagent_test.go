package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"flextopo.dev/e2e/internal/harness"
)

// TestChartNodeAgentAccess creates the node agent's RBAC objects and its
// ValidatingAdmissionPolicy for real and checks what the agent's identity
// may do: RBAC with SubjectAccessReviews, and the policy by writing as the
// agent (impersonated, with the node name a pod-bound token carries in
// authentication.kubernetes.io/node-name) to its own node and pods, to
// another node's, and outside metadata.
func TestChartNodeAgentAccess(t *testing.T) {
	e := requireChart(t)
	c := e.c
	const ns, other = "chart-node-agent", "chart-node-agent-pods"
	e.createNamespace(ns)
	e.createNamespace(other)
	r := e.render(ns, "mode=extender")
	objs := chartRBACObjects(r)
	for _, o := range r.objs {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			objs = append(objs, o)
		}
	}
	e.applyForReal(objs)
	if a, x := r.workloadSA(t, "DaemonSet").GetName(), r.workloadSA(t, "Deployment").GetName(); a == x {
		t.Fatalf("the node agent runs as the extender's service account %s", a)
	}
	user, groups := chartSA(r, t, "DaemonSet")

	e.checkAccess(t, user, groups, []chartAccess{
		{true, "", "list", "", "pods", "", ""},
		{true, "", "watch", "", "pods", "", ""},
		{true, other, "get", "", "pods", "", "p"},
		{true, other, "patch", "", "pods", "", "p"},
		{true, "", "get", "", "nodes", "", "n1"},
		{true, "", "patch", "", "nodes", "", "n1"},
		{false, other, "create", "", "pods", "binding", "p"},
		{false, other, "delete", "", "pods", "", "p"},
		{false, other, "update", "", "pods", "", "p"},
		{false, other, "create", "", "pods", "", ""},
		{false, "", "list", "", "nodes", "", ""},
		{false, "", "delete", "", "nodes", "", "n1"},
		{false, other, "get", "", "secrets", "", "s"},
		{false, "", "list", "", "secrets", "", ""},
		{false, other, "create", "", "events", "", ""},
	})

	// Two nodes and a pod bound to each (no kubelet runs: they stay
	// Pending, which is all the policy looks at).
	own, elsewhere := "chart-agent-own", "chart-agent-other"
	cx := harness.Ctx(t, 30*time.Second)
	for _, n := range []string{own, elsewhere} {
		if _, err := c.Client.CoreV1().Nodes().Create(cx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}},
			metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		n := n
		t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "on-" + n, Namespace: other},
			Spec: corev1.PodSpec{
				NodeName:   n,
				Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
			},
		}
		if _, err := c.Client.CoreV1().Pods(other).Create(cx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	agent := func(node string) kubernetes.Interface {
		cfg := chartRESTConfig(c, c.PKI.Token)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
		if node != "" {
			cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	annotate := []byte(`{"metadata":{"annotations":{"flextopo.io/observed":"{}"}}}`)
	changeSpec := []byte(`{"spec":{"activeDeadlineSeconds":60}}`)
	nodeAnnotate := []byte(`{"metadata":{"annotations":{"flextopo.io/topology":"{}"}}}`)
	type write struct {
		what    string
		as      string // node name the agent's token carries
		node    bool   // patch a node, else a pod
		target  string
		patch   []byte
		allowed bool
	}
	writes := []write{
		{"annotate its own pod", own, false, "on-" + own, annotate, true},
		{"annotate its own node", own, true, own, nodeAnnotate, true},
		{"annotate another node's pod", own, false, "on-" + elsewhere, annotate, false},
		{"annotate another node", own, true, elsewhere, nodeAnnotate, false},
		{"change its own pod's spec", own, false, "on-" + own, changeSpec, false},
		{"annotate a pod without a node-bound token", "", false, "on-" + own, annotate, false},
	}
	// The API server loads policies and bindings from informers: a write
	// the policy must deny is tried again until the policy is in force.
	const settle = 10 * time.Second
	for _, w := range writes {
		deadline := time.Now().Add(settle)
		for {
			err := patchAs(agent(w.as), w.node, other, w.target, w.patch)
			if w.allowed && err != nil && time.Now().Before(deadline) && apierrors.IsForbidden(err) {
				time.Sleep(100 * time.Millisecond)
				continue // RBAC not caught up yet
			}
			if !w.allowed && err == nil && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			switch {
			case w.allowed && err != nil:
				t.Errorf("agent on %q: %s: %v, want allowed", w.as, w.what, err)
			case !w.allowed && err == nil:
				t.Errorf("agent on %q: %s: allowed, want denied by the policy", w.as, w.what)
			case !w.allowed && !strings.Contains(err.Error(), "flextopo-node may"):
				t.Errorf("agent on %q: %s: %v, want the policy's message", w.as, w.what, err)
			default:
				t.Logf("agent on %q: %s: %s", w.as, w.what, outcome(err))
			}
			break
		}
	}
}

func patchAs(cs kubernetes.Interface, node bool, ns, name string, patch []byte) error {
	cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if node {
		_, err = cs.CoreV1().Nodes().Patch(cx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = cs.CoreV1().Pods(ns).Patch(cx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	}
	return err
}

func outcome(err error) string {
	if err == nil {
		return "allowed"
	}
	return fmt.Sprintf("denied: %v", err)
}
