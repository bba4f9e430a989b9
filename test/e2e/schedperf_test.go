package e2e

// A scheduler_perf-style throughput benchmark (how much flextopo slows
// kube-scheduler): the e2e's real kube-apiserver, etcd and kube-scheduler, N
// A100-like nodes created through the API, M GPU pods, and the arms
// alternating in one run - kube-scheduler alone, kube-scheduler with flextopo
// as the shipped configuration registers it, and flextopo-scheduler
// (flextopo's framework plugins in the scheduler process, when
// FLEXTOPO_SCHEDULER or build/flextopo-scheduler is there). It prints
// figures; it asserts no speed. Run it with scripts/schedperf.sh (FLEXTOPO_SCHEDPERF=NODESxPODS,...);
// without that variable it is skipped.
//
// Settings, as kube-scheduler's scheduler_perf sets them: the schedulers'
// client QPS and burst are raised to 5000 so that the client-side rate
// limiter (default 50 QPS) does not cap binds; the benchmark's own client
// creates the pods before the arm's scheduler starts, so that creation does
// not bound the rate; throughput is sampled every second as the pods bind
// (watch), from the first bind to the last, and reported as scheduler_perf
// reports SchedulingThroughput (average, p50, p90, p99 of the samples).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const perfLabel = "e2e.flextopo.io/schedperf"

type perfSize struct{ nodes, pods int }

func perfSizes(t *testing.T) []perfSize {
	spec := os.Getenv("FLEXTOPO_SCHEDPERF")
	if spec == "" {
		t.Skip("FLEXTOPO_SCHEDPERF not set (scripts/schedperf.sh runs this benchmark)")
	}
	var out []perfSize
	for _, part := range strings.Split(spec, ",") {
		n, p, ok := strings.Cut(strings.TrimSpace(part), "x")
		nodes, err1 := strconv.Atoi(n)
		pods, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil || nodes <= 0 || pods <= 0 {
			t.Fatalf("FLEXTOPO_SCHEDPERF: %q is not NODESxPODS", part)
		}
		out = append(out, perfSize{nodes, pods})
	}
	return out
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// perfNodeTopo is an A100-like box: 2 NUMA nodes of 64 CPUs and 512 GiB,
// 4 GPUs under each, all 8 linked through NVSwitch.
func perfNodeTopo(node string) *flextopo.Topology {
	b := newTopo(node).gpuModel(a100Model, a100MemMiB)
	so := b.socket()
	g := append(b.switchGPUs(b.numa(so, "0-63", 524288), 4), b.switchGPUs(b.numa(so, "64-127", 524288), 4)...)
	for i := range g {
		for j := i + 1; j < len(g); j++ {
			b.nvlink(g[i], g[j], 12)
		}
	}
	return b.build()
}

// perfPods is the pod mix of one size, the same for every arm: 1 or 2 GPUs;
// a quarter Guaranteed with 8 pinned CPUs in numa/guaranteed mode. With
// cpuOnly > 0 (FLEXTOPO_SCHEDPERF_CPU_ONLY, a percentage), that share of the
// pods asks for no GPU (4 CPUs, 8 GiB): flextopo ranks such pods but does
// not filter them. At 0 the mix is the one every earlier figure used.
func perfPods(n int, seed int64, cpuOnly int) []podSpec {
	rng := rand.New(rand.NewSource(seed))
	out := make([]podSpec, n)
	for i := range out {
		ps := podSpec{name: fmt.Sprintf("p%05d", i), gpus: 1 + rng.Intn(2), cpu: "4", memory: "8Gi"}
		if rng.Intn(4) == 0 {
			ps.cpu, ps.memory, ps.guaranteed, ps.affinity, ps.mode = "8", "16Gi", true, "numa", "guaranteed"
		}
		if cpuOnly > 0 && rng.Intn(100) < cpuOnly {
			ps = podSpec{name: ps.name, cpu: "4", memory: "8Gi"}
		}
		out[i] = ps
	}
	return out
}

func (s *scenario) addPerfNodes(t *testing.T, count int) []string {
	names := make([]string, count)
	start := time.Now()
	err := harness.Parallel(count, 16, func(i int) error {
		name := s.nodeName(fmt.Sprintf("%05d", i))
		topo := perfNodeTopo(name)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{labelTest: s.id, perfLabel: s.id, "kubernetes.io/hostname": name},
			Annotations: map[string]string{flextopo.AnnTopology: topo.JSON()},
		}}
		cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		created, err := s.c.Client.CoreV1().Nodes().Create(cx, node, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		capacity := topo.NodeCapacity()
		now := metav1.Now()
		created.Status = corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(), Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now}},
		}
		if _, err := s.c.Client.CoreV1().Nodes().UpdateStatus(cx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
		names[i] = name
		return nil
	})
	if err != nil {
		t.Fatalf("create perf nodes: %v", err)
	}
	t.Cleanup(func() {
		cx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_ = s.c.Client.CoreV1().Nodes().DeleteCollection(cx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: perfLabel + "=" + s.id})
	})
	t.Logf("created %d nodes in %s", count, time.Since(start).Round(time.Millisecond))
	return names
}

// procStat is /proc/<pid>/stat of a process from its fourth field on (after
// the command name, which is in parentheses); nil when it has none.
func procStat(p *harness.Process) []string {
	pid := p.Pid()
	if pid == 0 {
		return nil
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	return strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
}

// cpuSeconds is a process's user+system CPU time so far.
func cpuSeconds(p *harness.Process) float64 {
	fields := procStat(p)
	if len(fields) < 13 {
		return math.NaN()
	}
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// rssMiB is a process's resident memory in MiB; NaN when it has none to
// read.
func rssMiB(p *harness.Process) float64 {
	fields := procStat(p)
	if len(fields) < 22 {
		return math.NaN()
	}
	pages, _ := strconv.ParseFloat(fields[21], 64)
	return pages * float64(os.Getpagesize()) / (1 << 20)
}

type armResult struct {
	arm       string
	pods      int
	seconds   float64 // first bind to last
	samples   []float64
	cpu       map[string]float64
	unbound   int
	extLatent string
	rss       map[string]float64 // MiB resident when the last pod bound
}

func (r armResult) avg() float64 { return float64(r.pods-r.unbound) / r.seconds }

// runArm creates the pods with the arm's scheduler name, starts that
// scheduler, samples binds per second until all are bound (or the timeout),
// stops the scheduler and deletes the pods.
func runArm(t *testing.T, s *scenario, arm, schedName string, pods []podSpec, start func() *harness.Process,
	procs map[string]*harness.Process, ext *harness.TestExtender) armResult {
	c := s.c
	ns := fmt.Sprintf("%s-%s", s.ns, arm)
	cx := harness.Ctx(t, 30*time.Second)
	if _, err := c.Client.CoreV1().Namespaces().Create(cx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := harness.Parallel(len(pods), 16, func(i int) error {
		ps := pods[i]
		ps.schedulerName = schedName
		ps.nodeSelector = map[string]string{perfLabel: s.id}
		p := s.podObject(ps)
		p.Namespace = ns
		cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := c.Client.CoreV1().Pods(ns).Create(cx, p, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("%s: create pods: %v", arm, err)
	}

	// Binds counted by an informer (it relists when a watch ends).
	var bound atomic.Int64
	var seenMu sync.Mutex
	seen := map[string]bool{}
	count := func(obj interface{}) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			seenMu.Lock()
			if !seen[p.Name] {
				seen[p.Name] = true
				bound.Add(1)
			}
			seenMu.Unlock()
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    count,
		UpdateFunc: func(_, obj interface{}) { count(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stopInf := make(chan struct{})
	defer close(stopInf)
	factory.Start(stopInf)
	factory.WaitForCacheSync(stopInf)

	cpu0 := map[string]float64{}
	for name, p := range procs {
		cpu0[name] = cpuSeconds(p)
	}
	sched := start()
	cpu0["kube-scheduler"] = cpuSeconds(sched)
	stopProfile := profileArm(t, arm, sched, procs["flextopo-extender"])
	metrics0 := ""
	if ext != nil {
		_, metrics0 = httpGet(ext.URL + "/metrics")
	}
	r := armResult{arm: arm, pods: len(pods), cpu: map[string]float64{}}
	timeout := time.Duration(envInt("FLEXTOPO_SCHEDPERF_TIMEOUT_S", 600)) * time.Second
	deadline := time.Now().Add(timeout)
	var first, last time.Time
	prev := int64(0)
	for {
		time.Sleep(time.Second)
		n := bound.Load()
		now := time.Now()
		if n > 0 && first.IsZero() {
			first = now.Add(-time.Second)
		}
		if !first.IsZero() && n < int64(len(pods)) {
			r.samples = append(r.samples, float64(n-prev))
		}
		prev = n
		if n >= int64(len(pods)) {
			last = now
			break
		}
		if now.After(deadline) {
			last = now
			r.unbound = len(pods) - int(n)
			t.Logf("%s: %d of %d pods unbound after %s; scheduler log:\n%s", arm, r.unbound, len(pods), timeout,
				harness.TailFile(sched.LogPath, 40))
			break
		}
	}
	r.seconds = last.Sub(first).Seconds()
	for name, p := range procs {
		r.cpu[name] = cpuSeconds(p) - cpu0[name]
	}
	r.rss = map[string]float64{"kube-scheduler": rssMiB(sched), "flextopo-extender": rssMiB(procs["flextopo-extender"])}
	r.cpu["kube-scheduler"] = cpuSeconds(sched) - cpu0["kube-scheduler"]
	stopProfile()
	if ext != nil {
		_, metrics1 := httpGet(ext.URL + "/metrics")
		r.extLatent = verbLatency(metrics0, metrics1)
		if n := filteredPerPod(ext.URL); n != "" {
			r.extLatent += "; " + n
		}
	}
	if n := schedulerWork(sched, schedName, len(pods)); n != "" {
		if r.extLatent != "" {
			r.extLatent += "; "
		}
		r.extLatent += n
	}
	sched.Stop(10 * time.Second)

	// No namespace controller runs: the pods are deleted one collection.
	zero := int64(0)
	dcx, dcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer dcancel()
	_ = c.Client.CoreV1().Pods(ns).DeleteCollection(dcx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	for {
		l, err := c.Client.CoreV1().Pods(ns).List(dcx, metav1.ListOptions{Limit: 1})
		if err != nil || len(l.Items) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return r
}

// profileArm records a CPU profile of the arm's scheduler and extender
// with perf (Go and C frames alike) while its pods bind, when
// FLEXTOPO_SCHEDPERF_PERF names a folder: <folder>/<arm>.perf.data, read
// with `perf report -i`. It returns the function that stops the recording.
func profileArm(t *testing.T, arm string, procs ...*harness.Process) func() {
	dir := os.Getenv("FLEXTOPO_SCHEDPERF_PERF")
	if dir == "" {
		return func() {}
	}
	var pids []string
	for _, p := range procs {
		if pid := p.Pid(); pid != 0 {
			pids = append(pids, strconv.Itoa(pid))
		}
	}
	out := filepath.Join(dir, arm+".perf.data")
	cmd := exec.Command("perf", "record", "--quiet", "-F", "499", "-g", "-o", out, "-p", strings.Join(pids, ","))
	if err := cmd.Start(); err != nil {
		t.Logf("%s: no profile: %v", arm, err)
		return func() {}
	}
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait() // perf exits on the signal it was stopped with
		t.Logf("%s: profile in %s", arm, out)
	}
}

// filteredPerPod is the mean number of nodes flextopo's filter saw per
// pod over the last pods of the arm (its decision log): the nodes that
// passed kube-scheduler's own filters first.
func filteredPerPod(url string) string {
	code, body := httpGet(url + "/debug/decisions?limit=300")
	var log struct {
		Decisions []struct {
			Verb       string `json:"verb"`
			NodesTotal int    `json:"nodesTotal"`
		} `json:"decisions"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &log) != nil {
		return ""
	}
	total, pods := 0, 0
	for _, d := range log.Decisions {
		if d.Verb == "filter" {
			total += d.NodesTotal
			pods++
		}
	}
	if pods == 0 {
		return ""
	}
	return fmt.Sprintf("filter saw %.0f nodes per pod (last %d pods)", float64(total)/float64(pods), pods)
}

// schedulerWork is what kube-scheduler's own metrics say of an arm, per
// pod: the nodes its NodeResourcesFit filter evaluated
// (scheduler_plugin_evaluation_total, one per node filtered:
// pkg/scheduler/framework/runtime/instrumented_plugins.go) and its
// scheduling attempts (scheduler_schedule_attempts_total). A placement that fills nodes makes the filter look
// at more nodes before it finds percentageOfNodesToScore feasible ones.
func schedulerWork(sched *harness.Process, profile string, pods int) string {
	if sched == nil || sched.MetricsURL == "" || pods == 0 {
		return ""
	}
	resp, err := harness.HTTPClient(nil).Get(sched.MetricsURL)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if resp.StatusCode != 200 {
		return ""
	}
	prof := `profile="` + profile + `"`
	var fit, attempts float64
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || !strings.Contains(name, prof) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, "scheduler_plugin_evaluation_total{") &&
			strings.Contains(name, `extension_point="Filter"`) && strings.Contains(name, `plugin="NodeResourcesFit"`):
			fit += v
		case strings.HasPrefix(name, "scheduler_schedule_attempts_total{"):
			attempts += v
		}
	}
	if fit == 0 && attempts == 0 {
		return ""
	}
	return fmt.Sprintf("kube-scheduler: NodeResourcesFit filtered %.0f nodes per pod, %.2f attempts per pod",
		fit/float64(pods), attempts/float64(pods))
}

// verbLatency is the extender's mean latency per verb between two /metrics
// texts (from the request_duration_seconds histogram's sum and count).
func verbLatency(before, after string) string {
	read := func(text string) map[string][2]float64 {
		out := map[string][2]float64{}
		for _, line := range strings.Split(text, "\n") {
			for i, suffix := range []string{"_sum{verb=\"", "_count{verb=\""} {
				key := "flextopo_request_duration_seconds" + suffix
				if !strings.HasPrefix(line, key) {
					continue
				}
				rest := line[len(key):]
				verb, val, _ := strings.Cut(rest, "\"} ")
				f, _ := strconv.ParseFloat(strings.TrimSpace(val), 64)
				v := out[verb]
				v[i] = f
				out[verb] = v
			}
		}
		return out
	}
	b, a := read(before), read(after)
	var parts []string
	for _, verb := range []string{"filter", "prioritize", "bind"} {
		n := a[verb][1] - b[verb][1]
		if n <= 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f calls, mean %.2f ms", verb, n, (a[verb][0]-b[verb][0])/n*1000))
	}
	return strings.Join(parts, "; ")
}

// TestSchedulerThroughput is the benchmark; see the top of the file.
func TestSchedulerThroughput(t *testing.T) {
	sizes := perfSizes(t)
	c := requireExtender(t)
	pairs := envInt("FLEXTOPO_SCHEDPERF_PAIRS", 2)
	qps := envInt("FLEXTOPO_SCHEDPERF_QPS", 5000)
	t.Logf("percentageOfNodesToScore %d", envInt("FLEXTOPO_SCHEDPERF_NODES_TO_SCORE", 0))
	var report strings.Builder
	fmt.Fprintf(&report, "| nodes / pods | arm | pair | pods/s avg | p50 | p90 | p99 | s | CPU s (apiserver, etcd, scheduler, extender) | RSS MiB (scheduler, extender) | extender verbs |\n")
	fmt.Fprintf(&report, "|---|---|---|---:|---:|---:|---:|---:|---|---|---|\n")
	for _, size := range sizes {
		// A subtest per size, so that its nodes and extenders are gone
		// before the next size starts.
		t.Run(fmt.Sprintf("%dx%d", size.nodes, size.pods), func(t *testing.T) {
			perfSize1(t, c, size, pairs, qps, &report)
		})
	}
	t.Logf("scheduler throughput:\n%s", report.String())
	if out := os.Getenv("FLEXTOPO_SCHEDPERF_REPORT"); out != "" {
		if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// perfSize1 runs the arm pairs of one size.
func perfSize1(t *testing.T, c *harness.Cluster, size perfSize, pairs, qps int, report *strings.Builder) {
	s := newScenario(t, c, fmt.Sprintf("perf%d", size.nodes))
	// The run's own extender watches every test's objects at debug log
	// level; the benchmark starts one of its own at the shipped log level.
	extCfg := map[string]interface{}{"logLevel": "info"}
	if th := envInt("FLEXTOPO_SCHEDPERF_THREADS", 0); th > 0 {
		extCfg["threads"] = th
	}
	ext := c.StartTestExtender(t, fmt.Sprintf("perf-extender-%d", size.nodes), extCfg)
	exts := map[string]*harness.TestExtender{"flextopo": ext}
	arms := []string{"alone", "flextopo"}
	// The plugin arm: flextopo-scheduler (scheduler/), the same core as
	// framework plugins in the scheduler process; its metrics are read
	// from its debug listener once it runs.
	plugin := harness.SchedulerBinary(c.RepoRoot)
	if harness.IsExecutable(plugin) {
		exts["plugin"] = &harness.TestExtender{Name: "plugin"}
		arms = append(arms, "plugin")
	} else {
		t.Logf("no plugin arm: %s not found", plugin)
	}
	if base := os.Getenv("FLEXTOPO_SCHEDPERF_BASELINE"); base != "" {
		baseCfg := map[string]interface{}{"logLevel": "info"}
		if th := envInt("FLEXTOPO_SCHEDPERF_BASELINE_THREADS", 0); th > 0 {
			baseCfg["threads"] = th
		}
		exts["baseline"] = c.StartTestExtenderBin(t, fmt.Sprintf("perf-baseline-%d", size.nodes), base, baseCfg)
		arms = append(arms, "baseline")
	}
	if only := os.Getenv("FLEXTOPO_SCHEDPERF_ARMS"); only != "" {
		arms = pickArms(t, arms, only)
	}
	s.addPerfNodes(t, size.nodes)
	cpuOnly := envInt("FLEXTOPO_SCHEDPERF_CPU_ONLY", 0)
	if cpuOnly > 100 {
		t.Fatalf("FLEXTOPO_SCHEDPERF_CPU_ONLY=%d: a percentage, 0 to 100", cpuOnly)
	}
	pods := perfPods(size.pods, 1, cpuOnly)
	if cpuOnly > 0 {
		n := 0
		for _, p := range pods {
			if p.gpus == 0 {
				n++
			}
		}
		t.Logf("%d of %d pods ask for no GPU (FLEXTOPO_SCHEDPERF_CPU_ONLY=%d)", n, len(pods), cpuOnly)
	}
	procs := map[string]*harness.Process{"kube-apiserver": c.APIServer, "etcd": c.Etcd}
	nodesToScore := envInt("FLEXTOPO_SCHEDPERF_NODES_TO_SCORE", 0)
	withSettings := func(cfg map[string]interface{}) {
		cc := cfg["clientConnection"].(map[string]interface{})
		cc["qps"] = qps
		cc["burst"] = qps
		// kube-scheduler's adaptive share of nodes (0) unless
		// FLEXTOPO_SCHEDPERF_NODES_TO_SCORE says otherwise: most of
		// bench/README.md's figures were measured at 0, while the
		// shipped configuration's 100 sends every node to filter and
		// prioritize (10 times the names at 5,000 nodes).
		cfg["percentageOfNodesToScore"] = nodesToScore
	}
	// FLEXTOPO_SCHEDPERF_ALONE=flextopo-scheduler: the alone arm runs
	// flextopo-scheduler's binary with a profile that does not enable
	// FlexTopo, so that its profile has the same build and symbols as the
	// plugin arm's.
	aloneOnPlugin := os.Getenv("FLEXTOPO_SCHEDPERF_ALONE") == "flextopo-scheduler"
	if aloneOnPlugin && !harness.IsExecutable(plugin) {
		t.Fatalf("FLEXTOPO_SCHEDPERF_ALONE: %s not found", plugin)
	}
	if aloneOnPlugin {
		t.Logf("alone arm: %s, FlexTopo not enabled", plugin)
	}
	ratios := map[string][]float64{}
	for pair := 1; pair <= pairs; pair++ {
		results := map[string]armResult{}
		for _, arm := range arms {
			arm := arm
			schedName := fmt.Sprintf("perf-%s-%d-%d", arm, size.nodes, pair)
			start := func() *harness.Process {
				if arm == "plugin" {
					ps := c.StartPluginScheduler(t, schedName, plugin, schedName, map[string]interface{}{"logLevel": "info"},
						func(cfg map[string]interface{}) error { withSettings(cfg); return nil })
					exts[arm].URL = ps.DebugURL
					return ps.Proc
				}
				bin, sub := c.Testenv, []string{"kube-scheduler"}
				if arm == "alone" && aloneOnPlugin {
					bin, sub = plugin, nil
				}
				p, err := c.StartExtraSchedulerBin(bin, sub, schedName, schedName, func(cfg map[string]interface{}) error {
					withSettings(cfg)
					if arm == "alone" {
						delete(cfg, "extenders")
					} else {
						ext0 := cfg["extenders"].([]interface{})[0].(map[string]interface{})
						ext0["urlPrefix"] = exts[arm].URL
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			procs["flextopo-extender"] = nil
			if e := exts[arm]; e != nil && e.Proc != nil {
				procs["flextopo-extender"] = e.Proc
			}
			r := runArm(t, s, fmt.Sprintf("%s-%d", arm, pair), schedName, pods, start, procs, exts[arm])
			results[arm] = r
			fmt.Fprintf(report, "| %d / %d | %s | %d | %.1f | %.0f | %.0f | %.0f | %.1f | %.1f, %.1f, %.1f, %.1f | %.0f, %.0f | %s |\n",
				size.nodes, size.pods, arm, pair, r.avg(), harness.Percentile(r.samples, 50), harness.Percentile(r.samples, 90),
				harness.Percentile(r.samples, 99), r.seconds, r.cpu["kube-apiserver"], r.cpu["etcd"], r.cpu["kube-scheduler"],
				r.cpu["flextopo-extender"], r.rss["kube-scheduler"], r.rss["flextopo-extender"], r.extLatent)
			if r.unbound > 0 {
				fmt.Fprintf(report, "|  | %s: %d pods unbound at the timeout |||||||||\n", arm, r.unbound)
			}
		}
		for _, arm := range arms[1:] {
			ratios[arm] = append(ratios[arm], results[arm].avg()/results["alone"].avg())
		}
	}
	for _, arm := range arms[1:] {
		mean, sd := meanSD(ratios[arm])
		fmt.Fprintf(report, "| %d / %d | ratio %s/alone | | %.2f ± %.2f (%d pairs) |||||||\n",
			size.nodes, size.pods, arm, mean, sd, len(ratios[arm]))
	}
}

// pickArms keeps the arms a comma-separated list names, alone first: the
// ratios are to it.
func pickArms(t *testing.T, arms []string, only string) []string {
	out := []string{"alone"}
	for _, name := range strings.Split(only, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(arms, name) {
			t.Fatalf("FLEXTOPO_SCHEDPERF_ARMS: no arm %q here (%s)", name, strings.Join(arms, ", "))
		}
		if name != "alone" {
			out = append(out, name)
		}
	}
	return out
}

func meanSD(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	if len(xs) < 2 {
		return mean, 0
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}
