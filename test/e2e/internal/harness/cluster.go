package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
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

// Cluster is a control plane (etcd, kube-apiserver) with, as started,
// kube-scheduler processes, a flextopo-extender and a
// kube-controller-manager.
type Cluster struct {
	WorkDir    string
	RepoRoot   string
	PKI        *PKI
	EtcdURL    string
	APIURL     string
	Kubeconfig string

	Etcd, APIServer, Scheduler, Extender *Process
	// ControllerManager runs only where a test starts it
	// (StartControllerManager).
	ControllerManager *Process

	// extraSchedulers are further kube-scheduler processes started by tests
	// (StartExtraScheduler), each with its own profile; stopped with the
	// cluster.
	extraMu         sync.Mutex
	extraSchedulers []*Process

	Testenv     string // the k8s-testenv binary
	ExtPort     int    // the extender's port (also when it is not running)
	ExtenderURL string // http://127.0.0.1:port
	// ExtenderDebugURL is its debug API (debugListen), http://127.0.0.1:port
	ExtenderDebugURL string
	Client           kubernetes.Interface
}

// IsCI says whether CI is set true: a missing binary then fails the run.
func IsCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1" || v == "yes"
}

// EnvBool says whether the environment variable name is 1, true or yes.
func EnvBool(name string) bool {
	v := strings.ToLower(os.Getenv(name))
	return v == "1" || v == "true" || v == "yes"
}

// IsExecutable says whether path is a regular file someone may run.
func IsExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Dir is the directory name under the work directory, created.
func (c *Cluster) Dir(name string) (string, error) {
	d := filepath.Join(c.WorkDir, name)
	return d, os.MkdirAll(d, 0o700)
}

func (c *Cluster) processes() []*Process {
	var ps []*Process
	for _, p := range []*Process{c.Etcd, c.APIServer, c.ControllerManager, c.Extender, c.Scheduler} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	c.extraMu.Lock()
	ps = append(ps, c.extraSchedulers...)
	c.extraMu.Unlock()
	return ps
}

// StartControlPlane generates the PKI and starts etcd and kube-apiserver,
// with a client of the given QPS and burst.
func (c *Cluster) StartControlPlane(testenv string, qps float32, burst int) error {
	pkiDir, err := c.Dir("pki")
	if err != nil {
		return err
	}
	if c.PKI, err = generatePKI(pkiDir); err != nil {
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
		Host:            c.APIURL,
		BearerToken:     c.PKI.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.PKI.CAPEM},
		QPS:             qps,
		Burst:           burst,
	}
	c.Client, err = kubernetes.NewForConfig(cfg)
	return err
}

// Start starts the control plane, the extender (when extender is not "")
// and kube-scheduler from the run's scheduler configuration.
func (c *Cluster) Start(testenv, extender string) error {
	if err := c.StartControlPlane(testenv, 100, 200); err != nil {
		return err
	}
	c.Testenv = testenv
	extPort, err := FreePort()
	if err != nil {
		return err
	}
	c.ExtPort = extPort
	c.ExtenderURL = "http://" + HostPort(extPort)
	if extender != "" {
		if err := c.startExtender(extender, extPort); err != nil {
			return err
		}
	} else {
		c.ExtenderURL = ""
	}
	return c.startScheduler(testenv, extPort)
}

// Stop stops every process of the cluster.
func (c *Cluster) Stop() {
	// Reverse dependency order: the schedulers and extender first, etcd last.
	c.extraMu.Lock()
	extra := append([]*Process(nil), c.extraSchedulers...)
	c.extraMu.Unlock()
	for _, p := range extra {
		p.Stop(15 * time.Second)
	}
	for _, p := range []*Process{c.Scheduler, c.Extender, c.ControllerManager, c.APIServer, c.Etcd} {
		p.Stop(15 * time.Second)
	}
}

func (c *Cluster) startEtcd(bin string) error {
	dir, err := c.Dir("etcd")
	if err != nil {
		return err
	}
	clientPort, err := FreePort()
	if err != nil {
		return err
	}
	peerPort, err := FreePort()
	if err != nil {
		return err
	}
	clientURL := "http://" + HostPort(clientPort)
	peerURL := "http://" + HostPort(peerPort)
	c.Etcd, err = StartProcess("etcd", filepath.Join(dir, "etcd.log"), bin, "etcd",
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
	err = WaitHTTP(c.Etcd, HTTPClient(nil), clientURL+"/health", nil, 60*time.Second, func(code int, body string) bool {
		return code == 200 && strings.Contains(body, `"health":"true"`)
	})
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	c.EtcdURL = clientURL
	return nil
}

func (c *Cluster) startAPIServer(bin string) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	return c.StartAPIServerOn(bin, port)
}

// StartAPIServerOn starts kube-apiserver on `port` (again, after a restart)
// and waits until it is ready.
func (c *Cluster) StartAPIServerOn(bin string, port int) error {
	dir, err := c.Dir("kube-apiserver")
	if err != nil {
		return err
	}
	c.APIURL = "https://" + HostPort(port)
	c.APIServer, err = StartProcess("kube-apiserver", filepath.Join(dir, "kube-apiserver.log"), bin, "kube-apiserver",
		"--etcd-servers="+c.EtcdURL,
		"--etcd-prefix=/registry",
		fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--tls-cert-file="+c.PKI.servingCrt,
		"--tls-private-key-file="+c.PKI.servingKey,
		"--token-auth-file="+c.PKI.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-key-file="+c.PKI.saKey,
		"--service-account-signing-key-file="+c.PKI.saKey,
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
	hdr := http.Header{"Authorization": {"Bearer " + c.PKI.Token}}
	err = WaitHTTP(c.APIServer, HTTPClient(c.PKI.CAPEM), c.APIURL+"/readyz", hdr, 120*time.Second, func(code int, _ string) bool {
		return code == 200
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	return nil
}

func (c *Cluster) writeKubeconfig() error {
	cluster := map[string]interface{}{"server": c.APIURL}
	if EnvBool("FLEXTOPO_E2E_INSECURE") {
		cluster["insecure-skip-tls-verify"] = true
	} else {
		cluster["certificate-authority-data"] = base64.StdEncoding.EncodeToString(c.PKI.CAPEM)
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
			"token": c.PKI.Token,
		}}},
	}
	b, err := yaml.Marshal(kc)
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.WorkDir, "kubeconfig")
	return os.WriteFile(c.Kubeconfig, b, 0o600)
}

func (c *Cluster) startExtender(bin string, port int) error {
	dir, err := c.Dir("extender")
	if err != nil {
		return err
	}
	// The shared extender scores without the fragmentation penalty: its
	// workload mix would hold the pods of every test, in whatever order the
	// parallel tests place them, and the penalty could then tip a test's
	// choice between nodes. fragmentation_test.go runs its own extender
	// with a window it fills itself.
	debugPort, err := FreePort()
	if err != nil {
		return err
	}
	c.ExtenderDebugURL = "http://" + HostPort(debugPort)
	cfg := filepath.Join(dir, "flextopo.yaml")
	body := fmt.Sprintf("fragmentationWindow: 0\ndebugListen: %q\n", HostPort(debugPort))
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return err
	}
	// Debug level: the preemption tests read the per-request preempt lines
	// from the extender's log to prove which nodes reached the verb.
	args := []string{"--config", cfg, "--kubeconfig", c.Kubeconfig, "--listen", HostPort(port), "--log-level", "debug"}
	args = append(args, strings.Fields(os.Getenv("FLEXTOPO_EXTENDER_ARGS"))...)
	c.Extender, err = StartProcess("flextopo-extender", filepath.Join(dir, "extender.log"), bin, args...)
	if err != nil {
		return err
	}
	err = WaitHTTP(c.Extender, HTTPClient(nil), c.ExtenderURL+"/readyz", nil, 60*time.Second, func(code int, _ string) bool {
		return code == 200
	})
	if err != nil {
		return fmt.Errorf("extender: %w", err)
	}
	return nil
}

// schedulerConfig reads the repository's scheduler configuration and points
// it at this run's kubeconfig and extender; nothing else is changed.
func (c *Cluster) schedulerConfig(extPort int) ([]byte, error) {
	cfg, err := c.SchedulerConfigMap(extPort)
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(cfg)
}

// SchedulerConfigSource is the scheduler configuration file the run starts
// from.
func (c *Cluster) SchedulerConfigSource() string {
	if src := os.Getenv("FLEXTOPO_SCHEDULER_CONFIG"); src != "" {
		return src
	}
	return filepath.Join(c.RepoRoot, "configs", "scheduler-config.yaml")
}

// SchedulerConfigMap is schedulerConfig before marshalling, for callers that
// change more (StartExtraScheduler).
func (c *Cluster) SchedulerConfigMap(extPort int) (map[string]interface{}, error) {
	src := c.SchedulerConfigSource()
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
	cc["kubeconfig"] = c.Kubeconfig
	exts, _ := cfg["extenders"].([]interface{})
	if len(exts) == 0 {
		return nil, fmt.Errorf("scheduler config %s: no extenders", src)
	}
	ext0, ok := exts[0].(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("scheduler config %s: extenders[0] is not a mapping", src)
	}
	ext0["urlPrefix"] = "http://" + HostPort(extPort)
	return cfg, nil
}

func (c *Cluster) startScheduler(bin string, extPort int) error {
	cfg, err := c.schedulerConfig(extPort)
	if err != nil {
		return err
	}
	c.Scheduler, err = c.runScheduler(bin, "kube-scheduler", cfg)
	return err
}

// StartScheduler starts the cluster's kube-scheduler (c.Scheduler) from the
// run's scheduler configuration, pointed at the extender on extPort, with
// mutate (when not nil) applied to the configuration (a map as read from
// YAML) before it is written: for a cluster of a test's own
// (StartControlPlane), whose extender the test starts itself.
func (c *Cluster) StartScheduler(extPort int, mutate func(cfg map[string]interface{}) error) error {
	cfg, err := c.SchedulerConfigMap(extPort)
	if err != nil {
		return err
	}
	if mutate != nil {
		if err := mutate(cfg); err != nil {
			return err
		}
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	c.ExtPort = extPort
	c.Scheduler, err = c.runScheduler(c.Testenv, "kube-scheduler", raw)
	return err
}

// StartControllerManager starts kube-controller-manager with only the
// named controllers (its --controllers flag, e.g. resourceclaim-controller)
// and waits until it is healthy. It talks to the API server as the admin.
func (c *Cluster) StartControllerManager(controllers []string) error {
	dir, err := c.Dir("kube-controller-manager")
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.ControllerManager, err = StartProcess("kube-controller-manager",
		filepath.Join(dir, "kube-controller-manager.log"), c.Testenv, "kube-controller-manager",
		"--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--v=2",
	)
	if err != nil {
		return err
	}
	err = WaitHTTP(c.ControllerManager, HTTPClient(nil), "https://"+HostPort(port)+"/healthz", nil, 90*time.Second,
		func(code int, _ string) bool { return code == 200 })
	if err != nil {
		return fmt.Errorf("kube-controller-manager: %w", err)
	}
	return nil
}

// runScheduler starts a kube-scheduler named name (its directory and log
// are named after it) with configuration cfg and waits until it is ready.
func (c *Cluster) runScheduler(bin, name string, cfg []byte) (*Process, error) {
	return c.runSchedulerBin(bin, []string{"kube-scheduler"}, name, cfg)
}

// runSchedulerBin is runScheduler for any binary that takes kube-scheduler's
// flags after the arguments sub (k8s-testenv's subcommand, or none).
func (c *Cluster) runSchedulerBin(bin string, sub []string, name string, cfg []byte) (*Process, error) {
	dir, err := c.Dir(name)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "scheduler-config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := append(append([]string(nil), sub...),
		"--config="+cfgPath,
		"--leader-elect=false",
		fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "certs"),
		// Its metrics (scheduler_perf reads the same ones), to tests on
		// loopback without a token.
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"--v=2",
	)
	p, err := StartProcess(name, filepath.Join(dir, name+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	p.MetricsURL = "https://" + HostPort(port) + "/metrics"
	err = WaitHTTP(p, HTTPClient(nil), "https://"+HostPort(port)+"/readyz", nil, 90*time.Second, func(code int, _ string) bool {
		return code == 200
	})
	if err != nil {
		p.Stop(5 * time.Second)
		return p, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// StartExtraScheduler starts one more kube-scheduler (process name name)
// from the run's scheduler configuration, with a single profile for
// schedulerName and mutate applied to the configuration (a map as read from
// YAML) before it is written. It runs until the cluster stops.
func (c *Cluster) StartExtraScheduler(name, schedulerName string, mutate func(cfg map[string]interface{}) error) (*Process, error) {
	return c.StartExtraSchedulerBin(c.Testenv, []string{"kube-scheduler"}, name, schedulerName, mutate)
}

// StartExtraSchedulerBin is StartExtraScheduler with another binary that
// takes kube-scheduler's flags after the arguments sub (flextopo-scheduler
// takes them with none).
func (c *Cluster) StartExtraSchedulerBin(bin string, sub []string, name, schedulerName string, mutate func(cfg map[string]interface{}) error) (*Process, error) {
	cfg, err := c.SchedulerConfigMap(c.ExtPort)
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
	p, err := c.runSchedulerBin(bin, sub, name, raw)
	if p != nil {
		c.extraMu.Lock()
		c.extraSchedulers = append(c.extraSchedulers, p)
		c.extraMu.Unlock()
	}
	return p, err
}

// TestExtender is a flextopo-extender that one test starts beside the run's
// own, with a configuration of its own.
type TestExtender struct {
	Name     string
	URL      string // the extender API, http://127.0.0.1:port
	DebugURL string // the debug API (debugListen)
	Proc     *Process
}

// StartTestExtender starts a flextopo-extender named name that watches the
// run's API server, with the keys of cfg (configs/flextopo.yaml documents
// them) written to its configuration file besides kubeconfig, listen,
// debugListen and logLevel debug. It waits until the extender is ready and
// stops it when the test ends.
func (c *Cluster) StartTestExtender(t *testing.T, name string, cfg map[string]interface{}) *TestExtender {
	t.Helper()
	return c.StartTestExtenderBin(t, name, ExtenderBinary(c.RepoRoot), cfg)
}

// StartTestExtenderBin is StartTestExtender with another flextopo-extender
// binary (a benchmark's baseline build).
func (c *Cluster) StartTestExtenderBin(t *testing.T, name, bin string, cfg map[string]interface{}) *TestExtender {
	t.Helper()
	dir, err := c.Dir(name)
	if err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	debugPort, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]interface{}{
		"kubeconfig": c.Kubeconfig, "listen": HostPort(port), "debugListen": HostPort(debugPort), "logLevel": "debug",
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
	p := TestProcess(t, name, dir, bin, "--config", cfgPath)
	e := &TestExtender{Name: name, URL: "http://" + HostPort(port), DebugURL: "http://" + HostPort(debugPort), Proc: p}
	err = WaitHTTP(p, HTTPClient(nil), e.URL+"/readyz", nil, 60*time.Second, func(code int, _ string) bool {
		return code == 200
	})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return e
}

// HTTPClient verifies https against caPEM, or (nil) accepts any certificate:
// kube-scheduler serves a self-signed certificate of its own.
func HTTPClient(caPEM []byte) *http.Client {
	tlsCfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback test components
	if caPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		tlsCfg = &tls.Config{RootCAs: pool}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
}

// WaitHTTP polls url until ok accepts the answer, the process exits, or the
// timeout passes.
func WaitHTTP(p *Process, client *http.Client, url string, hdr http.Header, timeout time.Duration, ok func(code int, body string) bool) error {
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		if err := p.CheckAlive(); err != nil {
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
				url, timeout, last, p.LogPath, TailFile(p.LogPath, 60))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// DumpLogs prints the end of every process's log.
func (c *Cluster) DumpLogs() {
	limits := map[string]int{"etcd": 40, "kube-apiserver": 80, "kube-controller-manager": 80, "kube-scheduler": 300, "flextopo-extender": 1000}
	for _, p := range c.processes() {
		n, ok := limits[p.Name]
		if !ok {
			n = 200 // extra schedulers
		}
		fmt.Printf("\n===== %s log (last %d lines of %s) =====\n%s", p.Name, n, p.LogPath, TailFile(p.LogPath, n))
	}
	fmt.Println("===== end of logs =====")
}

// CopyLogs copies every process's log into dir.
func (c *Cluster) CopyLogs(dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: log dir:", err)
		return
	}
	for _, p := range c.processes() {
		dst := filepath.Join(dir, filepath.Base(p.LogPath))
		if err := copyFile(dst, p.LogPath); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: copy log:", err)
		}
	}
}

// Ctx returns a context bounded by d and cancelled at the end of the test.
func Ctx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	cx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return cx
}
