package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"flextopo.dev/e2e/internal/harness"
)

// privateControlPlane starts an etcd and a kube-apiserver of the test's own,
// for a test that restarts them or loads them with thousands of pods: the
// shared cluster and the tests running beside it are not disturbed.
func privateControlPlane(t *testing.T, name string) *harness.Cluster {
	t.Helper()
	c := requireExtender(t)
	p := &harness.Cluster{WorkDir: filepath.Join(c.WorkDir, name), RepoRoot: c.RepoRoot, Testenv: c.Testenv}
	if err := os.MkdirAll(p.WorkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	err := p.StartControlPlane(c.Testenv, 2000, 4000)
	t.Cleanup(p.Stop)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

// extenderConfig writes a flextopo-extender configuration for the cluster
// into dir: its kubeconfig, a listener and a debug listener on free ports,
// logLevel info, and the keys of extra. It returns the file, the listener's
// port, and the listener's and debug listener's URLs.
func extenderConfig(t *testing.T, c *harness.Cluster, dir string, extra map[string]interface{}) (string, int, string, string) {
	t.Helper()
	port, err1 := harness.FreePort()
	debugPort, err2 := harness.FreePort()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	keys := map[string]interface{}{
		"kubeconfig": c.Kubeconfig, "listen": harness.HostPort(port), "debugListen": harness.HostPort(debugPort),
		"logLevel": "info",
	}
	for k, v := range extra {
		keys[k] = v
	}
	raw, err := yaml.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "flextopo.yaml")
	if err := os.WriteFile(cfg, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, port, "http://" + harness.HostPort(port), "http://" + harness.HostPort(debugPort)
}

// startExtenderProc starts a flextopo-extender on the cluster (logLevel
// info) without waiting for it; it returns the process and its listener's
// and debug listener's URLs.
func startExtenderProc(t *testing.T, c *harness.Cluster, name string) (*harness.Process, string, string) {
	t.Helper()
	dir, err := c.Dir(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, url, debugURL := extenderConfig(t, c, dir, map[string]interface{}{"fragmentationWindow": 0})
	p, err := harness.StartProcess(name, filepath.Join(dir, name+".log"), harness.ExtenderBinary(c.RepoRoot), "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(15 * time.Second) })
	return p, url, debugURL
}

// loadedCluster fills the cluster with `nodes` 8-GPU nodes (perfNodeTopo)
// and, on each, 8 pods bound with an allocation of one GPU each and 8
// CPU-only pods: 16 pods a node, all bound, none through a scheduler.
func loadedCluster(t *testing.T, c *harness.Cluster, id string, nodes int) (*scenario, []string) {
	t.Helper()
	s := newScenario(t, c, id)
	start := time.Now()
	names := s.addPerfNodes(t, nodes)
	err := harness.Parallel(nodes*16, 32, func(i int) error {
		node, k := names[i/16], i%16
		ps := podSpec{name: fmt.Sprintf("p%05d", i), cpu: "1", memory: "1Gi", nodeName: node}
		if k < 8 {
			ps.gpus = 1
			ps.allocation = allocationFor(node, perfNodeTopo(node), heldPod{gpus: []int{k}}, 0)
		}
		cx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, err := c.Client.CoreV1().Pods(s.ns).Create(cx, s.podObject(ps), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("create pods: %v", err)
	}
	t.Logf("cluster loaded: %d nodes, %d bound pods in %s", nodes, nodes*16, time.Since(start).Round(time.Millisecond))
	return s, names
}

// filterReply posts a filter for a pending 1-GPU pod on `nodes`; refusal is
// the reply's Error.
func filterReply(client *http.Client, url string, nodes []string) (passed []string, failed map[string]string, refusal string, err error) {
	body, _ := json.Marshal(map[string]interface{}{
		"Pod": map[string]interface{}{
			"metadata": map[string]interface{}{"name": "probe", "namespace": "default", "uid": "probe-uid"},
			"spec": map[string]interface{}{"containers": []interface{}{map[string]interface{}{
				"name": "m", "resources": map[string]interface{}{"limits": map[string]interface{}{"nvidia.com/gpu": "1"}},
			}}},
		},
		"NodeNames": nodes,
	})
	resp, err := client.Post(url+"/filter", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, nil, "", err
	}
	defer resp.Body.Close()
	var r struct {
		NodeNames   []string
		FailedNodes map[string]string
		Error       string
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, nil, "", err
	}
	return r.NodeNames, r.FailedNodes, r.Error, nil
}

// restartWindow is what one start of the extender looked like from
// kube-scheduler's side.
type restartWindow struct {
	ready          time.Duration // process start to /readyz 200
	firstAnswer    time.Duration // process start to the first filter answered from the model
	refused        int           // filters refused as not in sync before that
	answeredEarly  int           // filters answered from an incomplete model (must be 0)
	connectRefused int           // filters sent before the listener was up
}

// measureStart starts an extender and sends filters for a 1-GPU pod on a
// full node and a node with free GPUs, as fast as they are answered, until
// one is answered from the model; then it waits for /readyz.
func measureStart(t *testing.T, c *harness.Cluster, name, full, free string) (restartWindow, *harness.Process, string) {
	t.Helper()
	var w restartWindow
	client := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	p, url, debugURL := startExtenderProc(t, c, name)
	for time.Since(start) < 60*time.Second {
		if err := p.CheckAlive(); err != nil {
			t.Fatal(err)
		}
		passed, failed, refusal, err := filterReply(client, url, []string{full, free})
		if err != nil {
			w.connectRefused++
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if strings.Contains(refusal, "not in sync") && len(passed) == 0 && len(failed) == 0 {
			w.refused++
			continue
		}
		if len(passed) != 1 || passed[0] != free || failed[full] == "" {
			w.answeredEarly++
			t.Errorf("%s: filter passed %v, failed %v: want only %s to pass", name, passed, failed, free)
		}
		w.firstAnswer = time.Since(start)
		break
	}
	if w.firstAnswer == 0 {
		t.Fatalf("%s: no filter answered from the model within 60 s", name)
	}
	if err := harness.WaitHTTP(p, client, url+"/readyz", nil, 30*time.Second, func(code int, _ string) bool { return code == 200 }); err != nil {
		t.Fatal(err)
	}
	w.ready = time.Since(start)
	return w, p, debugURL
}

var listedRE = regexp.MustCompile(`informer (\S+): listed (\d+) objects at resourceVersion \S+ in (\d+) ms`)

// listTimes are the informers' list lines of an extender log.
func listTimes(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := listedRE.FindStringSubmatch(sc.Text()); m != nil {
			out = append(out, fmt.Sprintf("%s %s objects in %s ms", m[1], m[2], m[3]))
		}
	}
	return strings.Join(out, "; ")
}

// TestExtenderRestartWindow starts the extender, kills it (SIGKILL) and
// starts it again on a cluster with thousands of bound pods, and checks
// that no filter is answered from an incomplete model: until its informers
// have listed nodes, pods and PodDisruptionBudgets, every filter answers
// the reason as its Error, and the first answer from the model already sees
// the node whose GPUs are all held. It prints how long each start refused
// for.
// FLEXTOPO_E2E_RESTART_NODES sets the nodes (default 200: 3,200 pods).
func TestExtenderRestartWindow(t *testing.T) {
	p := privateControlPlane(t, "restart-window")
	nodes := envInt("FLEXTOPO_E2E_RESTART_NODES", 200)
	s, names := loadedCluster(t, p, "rw", nodes)
	// A node with every GPU held, and one with all eight free.
	free := s.addTopologyNode("free", perfNodeTopo(s.nodeName("free")))
	full := names[0]
	for i, name := range []string{"cold-start", "after-sigkill"} {
		w, proc, _ := measureStart(t, p, name, full, free)
		t.Logf("%s with %d pods on %d nodes: first filter answered from the model %s after the process started (/readyz %s); %d filters refused as not in sync, %d answered early, %d before the listener was up; lists: %s",
			name, nodes*16, nodes+1, w.firstAnswer.Round(time.Millisecond), w.ready.Round(time.Millisecond),
			w.refused, w.answeredEarly, w.connectRefused, listTimes(proc.LogPath))
		if i == 0 {
			proc.Kill()
		}
	}
}

// TestAPIServerRestartRelist kills kube-apiserver (SIGKILL) under a running
// extender, keeps it down for FLEXTOPO_E2E_APISERVER_DOWN_S seconds (default
// 5), starts it again on the same port and measures how long after the new
// API server is ready a node created then reaches the extender's model. The
// informers' watches fail, so the extender is not ready (its verbs refuse)
// until they have relisted; they retry with the failure backoff (0.8 s
// doubling), and a 410 would relist at once.
func TestAPIServerRestartRelist(t *testing.T) {
	p := privateControlPlane(t, "apiserver-restart")
	s := newScenario(t, p, "ar")
	before := s.addTopologyNode("before", perfNodeTopo(s.nodeName("before")))
	proc, url, debugURL := startExtenderProc(t, p, "extender")
	client := &http.Client{Timeout: 5 * time.Second}
	if err := harness.WaitHTTP(proc, client, url+"/readyz", nil, 60*time.Second, func(code int, _ string) bool { return code == 200 }); err != nil {
		t.Fatal(err)
	}
	waitInModel(t, client, debugURL, before, 30*time.Second)
	port := apiPort(t, p)
	down := time.Now()
	p.APIServer.Kill()
	p.APIServer.Stop(0)
	if err := harness.WaitHTTP(proc, client, url+"/readyz", nil, 30*time.Second, func(code int, _ string) bool { return code == 503 }); err != nil {
		t.Fatalf("the extender stays ready with its API server gone: %v", err)
	}
	time.Sleep(time.Duration(envInt("FLEXTOPO_E2E_APISERVER_DOWN_S", 5)) * time.Second)
	if err := p.StartAPIServerOn(p.Testenv, port); err != nil {
		t.Fatal(err)
	}
	ready := time.Now()
	t.Cleanup(func() { p.APIServer.Stop(15 * time.Second) })
	after := s.addTopologyNode("after", perfNodeTopo(s.nodeName("after")))
	seen := waitInModel(t, client, debugURL, after, 120*time.Second)
	t.Logf("kube-apiserver killed and down for %s until the new one was ready; a node created then was in the extender's model %s after the API server was ready",
		ready.Sub(down).Round(time.Millisecond), seen.Sub(ready).Round(time.Millisecond))
	t.Logf("extender informer lines:\n%s", grepFile(proc.LogPath, "informer "))
	if err := harness.WaitHTTP(proc, client, url+"/readyz", nil, 60*time.Second, func(code int, _ string) bool { return code == 200 }); err != nil {
		t.Fatal(err)
	}
}

// apiPort is the port of the cluster's kube-apiserver.
func apiPort(t *testing.T, c *harness.Cluster) int {
	t.Helper()
	var port int
	if _, err := fmt.Sscanf(c.APIURL[strings.LastIndex(c.APIURL, ":")+1:], "%d", &port); err != nil {
		t.Fatalf("api URL %s: %v", c.APIURL, err)
	}
	return port
}

// waitInModel polls the debug API until `node` is in the model; it returns
// when it first saw it.
func waitInModel(t *testing.T, client *http.Client, debugURL, node string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := client.Get(debugURL + "/debug/nodes/" + node)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("node %s not in the extender's model after %s", node, timeout)
	return time.Time{}
}

// grepFile returns the lines of a file that contain `s`.
func grepFile(path, s string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
