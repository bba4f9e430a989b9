package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// cluster is the control plane and extender shared by every test.
type cluster struct {
	workDir    string
	repoRoot   string
	pki        *pkiFiles
	etcdURL    string
	apiURL     string
	kubeconfig string

	etcd, apiserver, scheduler, extender *process

	// extraSchedulers are further kube-scheduler processes started by tests
	// (startExtraScheduler), each with its own profile; stopped with the
	// cluster.
	extraMu         sync.Mutex
	extraSchedulers []*process

	testenv     string // the k8s-testenv binary
	extPort     int    // the extender's port (also when it is not running)
	extenderURL string // http://127.0.0.1:port
	// extenderDebugURL is its debug API (debugListen), http://127.0.0.1:port
	extenderDebugURL string
	client           kubernetes.Interface
}

var (
	env *cluster
	// skipReason is set when a local run lacks the extender: the control
	// plane tests still run, the placement scenarios skip.
	skipReason string
	// setupErr is set when the cluster could not be started: every test fails
	// with it.
	setupErr error
)

func isCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1" || v == "yes"
}

func envBool(name string) bool {
	v := strings.ToLower(os.Getenv(name))
	return v == "1" || v == "true" || v == "yes"
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		return 0
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}

	testenv := os.Getenv("K8S_TESTENV")
	if testenv == "" || !isExecutable(testenv) {
		msg := fmt.Sprintf("K8S_TESTENV=%q is not an executable k8s-testenv binary; run scripts/e2e.sh, which builds it", testenv)
		if isCI() {
			fmt.Fprintln(os.Stderr, "e2e: FAIL:", msg)
			return 1
		}
		fmt.Println("e2e: SKIP:", msg)
		return 0
	}

	extender := extenderBinary(root)
	if !isExecutable(extender) {
		msg := fmt.Sprintf("extender binary %s not found or not executable (set FLEXTOPO_EXTENDER or build it first)", extender)
		if isCI() {
			fmt.Fprintln(os.Stderr, "e2e: FAIL:", msg)
			return 1
		}
		fmt.Println("e2e: SKIP placement scenarios:", msg)
		skipReason = msg
		extender = ""
	}

	workDir, err := os.MkdirTemp("", "flextopo-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	fmt.Println("e2e: work directory", workDir)

	c := &cluster{workDir: workDir, repoRoot: root}
	start := time.Now()
	setupErr = c.start(testenv, extender)
	if setupErr == nil {
		fmt.Printf("e2e: cluster up in %s (apiserver %s, extender %s)\n",
			time.Since(start).Round(100*time.Millisecond), c.apiURL, orNone(c.extenderURL))
		env = c
	} else {
		fmt.Fprintln(os.Stderr, "e2e: cluster setup failed:", setupErr)
	}

	code := 1
	if setupErr == nil {
		code = m.Run()
	}
	c.stop()

	if code != 0 {
		c.dumpLogs()
	}
	if dir := os.Getenv("FLEXTOPO_E2E_LOG_DIR"); dir != "" {
		c.copyLogs(dir)
	}
	if code == 0 && !envBool("FLEXTOPO_E2E_KEEP") {
		os.RemoveAll(workDir)
	} else {
		fmt.Println("e2e: kept work directory", workDir)
	}
	return code
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// requireCluster fails the test when setup failed.
func requireCluster(t *testing.T) *cluster {
	t.Helper()
	if env == nil {
		t.Fatalf("cluster not available: %v", setupErr)
	}
	return env
}

// requireExtender also skips (local runs only) when there is no extender.
func requireExtender(t *testing.T) *cluster {
	t.Helper()
	c := requireCluster(t)
	if c.extender == nil {
		t.Skip(skipReason)
	}
	if err := c.extender.checkAlive(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cluster) dir(name string) (string, error) {
	d := filepath.Join(c.workDir, name)
	return d, os.MkdirAll(d, 0o700)
}

func (c *cluster) processes() []*process {
	var ps []*process
	for _, p := range []*process{c.etcd, c.apiserver, c.extender, c.scheduler} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	c.extraMu.Lock()
	ps = append(ps, c.extraSchedulers...)
	c.extraMu.Unlock()
	return ps
}

// startControlPlane generates the PKI and starts etcd and kube-apiserver,
// with a client of the given QPS and burst.
func (c *cluster) startControlPlane(testenv string, qps float32, burst int) error {
	pkiDir, err := c.dir("pki")
	if err != nil {
		return err
	}
	if c.pki, err = generatePKI(pkiDir); err != nil {
		return fmt.Errorf("generate PKI: %w", err)
	}
	if err := c.startEtcd(testenv); err != nil {
		return err
	}
	if err := c.startAPIServer(testenv); err != nil {
		return err
	}
	if err := c.writeKubeconfig(); err != nil {
		return err
	}
	cfg := &rest.Config{
		Host:            c.apiURL,
		BearerToken:     c.pki.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM},
		QPS:             qps,
		Burst:           burst,
	}
	c.client, err = kubernetes.NewForConfig(cfg)
	return err
}

func (c *cluster) start(testenv, extender string) error {
	if err := c.startControlPlane(testenv, 100, 200); err != nil {
		return err
	}
	c.testenv = testenv
	extPort, err := freePort()
	if err != nil {
		return err
	}
	c.extPort = extPort
	c.extenderURL = "http://" + hostPort(extPort)
	if extender != "" {
		if err := c.startExtender(extender, extPort); err != nil {
			return err
		}
	} else {
		c.extenderURL = ""
	}
	return c.startScheduler(testenv, extPort)
}

func (c *cluster) stop() {
	// Reverse dependency order: the schedulers and extender first, etcd last.
	c.extraMu.Lock()
	extra := append([]*process(nil), c.extraSchedulers...)
	c.extraMu.Unlock()
	for _, p := range extra {
		p.stop(15 * time.Second)
	}
	for _, p := range []*process{c.scheduler, c.extender, c.apiserver, c.etcd} {
		p.stop(15 * time.Second)
	}
}

func (c *cluster) startEtcd(bin string) error {
	dir, err := c.dir("etcd")
	if err != nil {
		return err
	}
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	clientURL := "http://" + hostPort(clientPort)
	peerURL := "http://" + hostPort(peerPort)
	c.etcd, err = startProcess("etcd", filepath.Join(dir, "etcd.log"), bin, "etcd",
		"--name=e2e",
		"--data-dir="+filepath.Join(dir, "data"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	err = waitHTTP(c.etcd, httpClient(nil), clientURL+"/health", nil, 60*time.Second, func(code int, body string) bool {
		return code == 200 && strings.Contains(body, `"health":"true"`)
	})
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	c.etcdURL = clientURL
	return nil
}

func (c *cluster) startAPIServer(bin string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	return c.startAPIServerOn(bin, port)
}

// startAPIServerOn starts kube-apiserver on `port` (again, after a restart)
// and waits until it is ready.
func (c *cluster) startAPIServerOn(bin string, port int) error {
	dir, err := c.dir("kube-apiserver")
	if err != nil {
		return err
	}
	c.apiURL = "https://" + hostPort(port)
	c.apiserver, err = startProcess("kube-apiserver", filepath.Join(dir, "kube-apiserver.log"), bin, "kube-apiserver",
		"--etcd-servers="+c.etcdURL,
		"--etcd-prefix=/registry",
		fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--tls-cert-file="+c.pki.servingCrt,
		"--tls-private-key-file="+c.pki.servingKey,
		"--token-auth-file="+c.pki.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-key-file="+c.pki.saKey,
		"--service-account-signing-key-file="+c.pki.saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.0.0.0/24",
		// No controller manager creates the "default" service account and no
		// node lifecycle controller ever removes the not-ready taint.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--v=1",
	)
	if err != nil {
		return err
	}
	hdr := http.Header{"Authorization": {"Bearer " + c.pki.token}}
	err = waitHTTP(c.apiserver, httpClient(c.pki.caPEM), c.apiURL+"/readyz", hdr, 120*time.Second, func(code int, _ string) bool {
		return code == 200
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	return nil
}

func (c *cluster) writeKubeconfig() error {
	cluster := map[string]interface{}{"server": c.apiURL}
	if envBool("FLEXTOPO_E2E_INSECURE") {
		cluster["insecure-skip-tls-verify"] = true
	} else {
		cluster["certificate-authority-data"] = base64.StdEncoding.EncodeToString(c.pki.caPEM)
	}
	kc := map[string]interface{}{
		"apiVersion":      "v1",
		"kind":            "Config",
		"current-context": "e2e",
		"clusters":        []interface{}{map[string]interface{}{"name": "e2e", "cluster": cluster}},
		"contexts": []interface{}{map[string]interface{}{"name": "e2e", "context": map[string]interface{}{
			"cluster": "e2e", "user": "admin", "namespace": "default",
		}}},
		"users": []interface{}{map[string]interface{}{"name": "admin", "user": map[string]interface{}{
			"token": c.pki.token,
		}}},
	}
	b, err := yaml.Marshal(kc)
	if err != nil {
		return err
	}
	c.kubeconfig = filepath.Join(c.workDir, "kubeconfig")
	return os.WriteFile(c.kubeconfig, b, 0o600)
}

func (c *cluster) startExtender(bin string, port int) error {
	dir, err := c.dir("extender")
	if err != nil {
		return err
	}
	// The shared extender scores without the fragmentation penalty: its
	// workload mix would hold the pods of every test, in whatever order the
	// parallel tests place them, and the penalty could then tip a test's
	// choice between nodes. fragmentation_test.go runs its own extender
	// with a window it fills itself.
	debugPort, err := freePort()
	if err != nil {
		return err
	}
	c.extenderDebugURL = "http://" + hostPort(debugPort)
	cfg := filepath.Join(dir, "flextopo.yaml")
	body := fmt.Sprintf("fragmentationWindow: 0\ndebugListen: %q\n", hostPort(debugPort))
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return err
	}
	// Debug level: the preemption tests read the per-request preempt lines
	// from the extender's log to prove which nodes reached the verb.
	args := []string{"--config", cfg, "--kubeconfig", c.kubeconfig, "--listen", hostPort(port), "--log-level", "debug"}
	args = append(args, strings.Fields(os.Getenv("FLEXTOPO_EXTENDER_ARGS"))...)
	c.extender, err = startProcess("flextopo-extender", filepath.Join(dir, "extender.log"), bin, args...)
	if err != nil {
		return err
	}
	err = waitHTTP(c.extender, httpClient(nil), c.extenderURL+"/readyz", nil, 60*time.Second, func(code int, _ string) bool {
		return code == 200
	})
	if err != nil {
		return fmt.Errorf("extender: %w", err)
	}
	return nil
}

// schedulerConfig reads the repository's scheduler configuration and points
// it at this run's kubeconfig and extender; nothing else is changed.
func (c *cluster) schedulerConfig(extPort int) ([]byte, error) {
	cfg, err := c.schedulerConfigMap(extPort)
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(cfg)
}

// schedulerConfigSource is the scheduler configuration file the run starts
// from.
func (c *cluster) schedulerConfigSource() string {
	if src := os.Getenv("FLEXTOPO_SCHEDULER_CONFIG"); src != "" {
		return src
	}
	return filepath.Join(c.repoRoot, "configs", "scheduler-config.yaml")
}

// schedulerConfigMap is schedulerConfig before marshalling, for callers that
// change more (startExtraScheduler).
func (c *cluster) schedulerConfigMap(extPort int) (map[string]interface{}, error) {
	src := c.schedulerConfigSource()
	raw, err := os.ReadFile(src)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	var cfg map[string]interface{}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("scheduler config %s: %w", src, err)
	}
	if kind, _ := cfg["kind"].(string); kind != "KubeSchedulerConfiguration" {
		return nil, fmt.Errorf("scheduler config %s: kind is %q, want KubeSchedulerConfiguration", src, kind)
	}
	cc, _ := cfg["clientConnection"].(map[string]interface{})
	if cc == nil {
		cc = map[string]interface{}{}
		cfg["clientConnection"] = cc
	}
	cc["kubeconfig"] = c.kubeconfig
	exts, _ := cfg["extenders"].([]interface{})
	if len(exts) == 0 {
		return nil, fmt.Errorf("scheduler config %s: no extenders", src)
	}
	ext0, ok := exts[0].(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("scheduler config %s: extenders[0] is not a mapping", src)
	}
	ext0["urlPrefix"] = "http://" + hostPort(extPort)
	return cfg, nil
}

func (c *cluster) startScheduler(bin string, extPort int) error {
	cfg, err := c.schedulerConfig(extPort)
	if err != nil {
		return err
	}
	c.scheduler, err = c.runScheduler(bin, "kube-scheduler", cfg)
	return err
}

// runScheduler starts a kube-scheduler named name (its directory and log
// are named after it) with configuration cfg and waits until it is ready.
func (c *cluster) runScheduler(bin, name string, cfg []byte) (*process, error) {
	dir, err := c.dir(name)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "scheduler-config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := startProcess(name, filepath.Join(dir, name+".log"), bin, "kube-scheduler",
		"--config="+cfgPath,
		"--leader-elect=false",
		fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--v=2",
	)
	if err != nil {
		return nil, err
	}
	err = waitHTTP(p, httpClient(nil), "https://"+hostPort(port)+"/readyz", nil, 90*time.Second, func(code int, _ string) bool {
		return code == 200
	})
	if err != nil {
		p.stop(5 * time.Second)
		return p, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// startExtraScheduler starts one more kube-scheduler (process name name)
// from the run's scheduler configuration, with a single profile for
// schedulerName and mutate applied to the configuration (a map as read from
// YAML) before it is written. It runs until the cluster stops.
func (c *cluster) startExtraScheduler(name, schedulerName string, mutate func(cfg map[string]interface{}) error) (*process, error) {
	cfg, err := c.schedulerConfigMap(c.extPort)
	if err != nil {
		return nil, err
	}
	cfg["profiles"] = []interface{}{map[string]interface{}{"schedulerName": schedulerName}}
	if mutate != nil {
		if err := mutate(cfg); err != nil {
			return nil, err
		}
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	p, err := c.runScheduler(c.testenv, name, raw)
	if p != nil {
		c.extraMu.Lock()
		c.extraSchedulers = append(c.extraSchedulers, p)
		c.extraMu.Unlock()
	}
	return p, err
}

// testExtender is a flextopo-extender that one test starts beside the run's
// own, with a configuration of its own.
type testExtender struct {
	name     string
	url      string // the extender API, http://127.0.0.1:port
	debugURL string // the debug API (debugListen)
	proc     *process
}

// startTestExtender starts a flextopo-extender named name that watches the
// run's API server, with the keys of cfg (configs/flextopo.yaml documents
// them) written to its configuration file besides kubeconfig, listen,
// debugListen and logLevel debug. It waits until the extender is ready and
// stops it when the test ends.
func (c *cluster) startTestExtender(t *testing.T, name string, cfg map[string]interface{}) *testExtender {
	t.Helper()
	return c.startTestExtenderBin(t, name, extenderBinary(c.repoRoot), cfg)
}

// startTestExtenderBin is startTestExtender with another flextopo-extender
// binary (a benchmark's baseline build).
func (c *cluster) startTestExtenderBin(t *testing.T, name, bin string, cfg map[string]interface{}) *testExtender {
	t.Helper()
	dir, err := c.dir(name)
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	debugPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]interface{}{
		"kubeconfig": c.kubeconfig, "listen": hostPort(port), "debugListen": hostPort(debugPort), "logLevel": "debug",
	}
	for k, v := range cfg {
		all[k] = v
	}
	raw, err := yaml.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "flextopo.yaml")
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	p := testProcess(t, name, dir, bin, "--config", cfgPath)
	e := &testExtender{name: name, url: "http://" + hostPort(port), debugURL: "http://" + hostPort(debugPort), proc: p}
	err = waitHTTP(p, httpClient(nil), e.url+"/readyz", nil, 60*time.Second, func(code int, _ string) bool {
		return code == 200
	})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return e
}

// httpClient verifies https against caPEM, or (nil) accepts any certificate:
// kube-scheduler serves a self-signed certificate of its own.
func httpClient(caPEM []byte) *http.Client {
	tlsCfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback test components
	if caPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		tlsCfg = &tls.Config{RootCAs: pool}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
}

// waitHTTP polls url until ok accepts the answer, the process exits, or the
// timeout passes.
func waitHTTP(p *process, client *http.Client, url string, hdr http.Header, timeout time.Duration, ok func(code int, body string) bool) error {
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		if err := p.checkAlive(); err != nil {
			return err
		}
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
			resp.Body.Close()
			if ok(resp.StatusCode, string(body)) {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (last: %s); log %s:\n%s",
				url, timeout, last, p.logPath, tailFile(p.logPath, 60))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (c *cluster) dumpLogs() {
	limits := map[string]int{"etcd": 40, "kube-apiserver": 80, "kube-scheduler": 300, "flextopo-extender": 1000}
	for _, p := range c.processes() {
		n, ok := limits[p.name]
		if !ok {
			n = 200 // extra schedulers
		}
		fmt.Printf("\n===== %s log (last %d lines of %s) =====\n%s", p.name, n, p.logPath, tailFile(p.logPath, n))
	}
	fmt.Println("===== end of logs =====")
}

func (c *cluster) copyLogs(dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: log dir:", err)
		return
	}
	for _, p := range c.processes() {
		dst := filepath.Join(dir, filepath.Base(p.logPath))
		if err := copyFile(dst, p.logPath); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: copy log:", err)
		}
	}
}

// ctx returns a context bounded by d and cancelled at the end of the test.
func ctx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	cx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return cx
}
