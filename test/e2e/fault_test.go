package e2e

// The fault test: a control plane of the test's own, with thousands of pods
// already bound, its own kube-scheduler in the shipped configuration and a
// flextopo-extender on fixed ports, and a pool of 8-GPU nodes that 1-GPU
// pods fill exactly. While pods are being scheduled and others deleted, the
// test kills the extender, kills kube-apiserver several times, and freezes
// etcd for longer than the extender's API timeout; after each fault every
// pod must be bound, no GPU or pinned CPU held by two pods, every GPU pod's
// allocation must name its node and that node's GPUs, and the extender's
// /debug view must equal the annotations. It prints what each fault cost.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

// Metric lines the fault test reads from the extender's /metrics.
const (
	mBound    = `flextopo_binds_total{result="bound"}`
	mFailed   = `flextopo_binds_total{result="failed"}`
	mUnknown  = `flextopo_binds_total{result="unknown"}`
	mConflict = `flextopo_conflicts_found_total`
	mPodWatch = `flextopo_informer_restarts_total{resource="pods"}`
	mCapIdle  = `flextopo_http_connections_closed_total{reason="idle_at_cap"}`
	mCapNew   = `flextopo_http_connections_closed_total{reason="refused_at_cap"}`
)

// faultRig is the fault test's cluster: the private control plane, its
// kube-scheduler, the extender (restarted on the same ports) and the pool.
type faultRig struct {
	t      *testing.T
	c      *harness.Cluster
	pool   *scenario
	nodes  []string // the pool's nodes
	client *http.Client

	extDir, extCfg string
	url, debugURL  string
	ext            *harness.Process
	starts         int
	// gone sums the counters of the extender processes killed, as last
	// scraped, so that counts span restarts.
	gone map[string]float64

	live []string // pool pods created and not deleted, bound or not
	rng  *rand.Rand
}

// faultPhase is what one phase cost, for the summary.
type faultPhase struct {
	name    string
	pods    int           // pods created
	deleted int           // pods deleted meanwhile
	created time.Duration // first create to the last one answered
	bound   time.Duration // first create to every pod bound
	before  map[string]float64
	after   map[string]float64
	notes   []string
}

func (ph *faultPhase) delta(name string) float64 { return ph.after[name] - ph.before[name] }

// TestSchedulingUnderFaults runs the phases on one control plane:
//  1. burst: FLEXTOPO_E2E_FAULT_GPUS (default 1000) 1-GPU pods created at
//     once onto exactly that many GPUs (8-GPU nodes), a quarter of them
//     Guaranteed with 4 pinned CPUs;
//  2. extender-kill: half the pods replaced (each deleted as a new one is
//     created, with short-lived pods created and deleted among them), the
//     extender killed (SIGKILL) a quarter of the way through and started
//     again on its ports;
//  3. apiserver-kill: the same in FLEXTOPO_E2E_FAULT_APISERVER_KILLS waves
//     (default 3), kube-apiserver killed (SIGKILL) a quarter of the way
//     through each and started again on its port;
//  4. etcd-freeze: the same, etcd stopped (SIGSTOP) for
//     FLEXTOPO_E2E_FAULT_FREEZE_S (default 8) seconds, longer than the
//     extender's apiTimeoutMs (FLEXTOPO_E2E_FAULT_API_TIMEOUT_MS, default
//     3000), then continued.
//
// FLEXTOPO_E2E_FAULT_BG_NODES (default 128) full nodes of 16 bound pods each
// are in the cluster throughout. After each phase every pod is bound within
// FLEXTOPO_E2E_FAULT_BIND_TIMEOUT_S (default 120; a pod that kube-scheduler
// files as unschedulable with no event to requeue it waits 5 minutes) and
// checkInvariants holds. On 2 cores the defaults take about a minute.
func TestSchedulingUnderFaults(t *testing.T) {
	gpus := envInt("FLEXTOPO_E2E_FAULT_GPUS", 1000)
	if gpus%8 != 0 {
		t.Fatalf("FLEXTOPO_E2E_FAULT_GPUS=%d: want a multiple of 8 (8-GPU nodes)", gpus)
	}
	bgNodes := envInt("FLEXTOPO_E2E_FAULT_BG_NODES", 128)
	apiTimeoutMs := envInt("FLEXTOPO_E2E_FAULT_API_TIMEOUT_MS", 3000)
	freeze := time.Duration(envInt("FLEXTOPO_E2E_FAULT_FREEZE_S", 8)) * time.Second
	kills := envInt("FLEXTOPO_E2E_FAULT_APISERVER_KILLS", 3)
	if freeze <= time.Duration(apiTimeoutMs)*time.Millisecond {
		t.Fatalf("the freeze (%s) must outlast the extender's apiTimeoutMs (%d ms)", freeze, apiTimeoutMs)
	}

	setup := time.Now()
	p := privateControlPlane(t, "faults")
	loadedCluster(t, p, "fbg", bgNodes)
	r := &faultRig{t: t, c: p, client: &http.Client{Timeout: 5 * time.Second}, gone: map[string]float64{},
		rng: rand.New(rand.NewSource(1))}
	r.pool = newScenario(t, p, "fpool")
	r.nodes = r.pool.addPerfNodes(t, gpus/8)
	r.configureExtender(apiTimeoutMs)
	r.startExtender()
	if _, _, err := r.waitExtenderReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	r.startScheduler()
	t.Logf("setup: %d background nodes with %d bound pods, %d pool nodes with %d GPUs, extender (apiTimeoutMs %d) and kube-scheduler in %s",
		bgNodes, bgNodes*16, len(r.nodes), gpus, apiTimeoutMs, time.Since(setup).Round(time.Millisecond))

	var phases []*faultPhase
	phases = append(phases, r.burst(gpus))
	churn := gpus / 2
	phases = append(phases, r.extenderKill(churn))
	phases = append(phases, r.apiServerKills(churn, kills))
	phases = append(phases, r.etcdFreeze(churn, freeze))

	var b strings.Builder
	fmt.Fprintf(&b, "| phase | pods created | deleted | created in | all bound in | binds bound | failed | unknown | pod watch restarts | connections closed at the per-client cap (idle, new) | notes |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, ph := range phases {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f, %.0f | %s |\n", ph.name, ph.pods, ph.deleted,
			ph.created.Round(time.Millisecond), ph.bound.Round(time.Millisecond),
			ph.delta(mBound), ph.delta(mFailed), ph.delta(mUnknown), ph.delta(mPodWatch), ph.delta(mCapIdle), ph.delta(mCapNew),
			strings.Join(ph.notes, "; "))
	}
	t.Logf("faults on %d GPUs (%d nodes) beside %d bound pods, extender started %d times:\n%s",
		gpus, len(r.nodes), bgNodes*16, r.starts, b.String())
}

// configureExtender writes the extender's configuration: fixed ports, so that
// kube-scheduler finds a restarted extender where it left it.
func (r *faultRig) configureExtender(apiTimeoutMs int) {
	dir, err := r.c.Dir("fault-extender")
	if err != nil {
		r.t.Fatal(err)
	}
	r.extDir = dir
	r.extCfg, r.c.ExtPort, r.url, r.debugURL = extenderConfig(r.t, r.c, dir, map[string]interface{}{"apiTimeoutMs": apiTimeoutMs})
}

// startExtender starts the next extender process, without waiting for it.
func (r *faultRig) startExtender() {
	name := fmt.Sprintf("flextopo-extender-%d", r.starts)
	r.starts++
	p, err := harness.StartProcess(name, filepath.Join(r.extDir, name+".log"), harness.ExtenderBinary(r.c.RepoRoot), "--config", r.extCfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		p.Stop(15 * time.Second)
		if r.t.Failed() {
			r.t.Logf("%s log (%s):\n%s", name, p.LogPath, harness.TailFile(p.LogPath, 80))
		}
	})
	r.ext = p
}

// waitExtenderReady polls the extender every 10 ms until /readyz says 200:
// it returns when its listener first answered and when it was ready.
func (r *faultRig) waitExtenderReady(timeout time.Duration) (listening, ready time.Time, err error) {
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if err := r.ext.CheckAlive(); err != nil {
			return listening, ready, err
		}
		resp, err := r.client.Get(r.url + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if listening.IsZero() {
				listening = time.Now()
			}
			if resp.StatusCode == http.StatusOK {
				return listening, time.Now(), nil
			}
			last = fmt.Sprintf("HTTP %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		time.Sleep(10 * time.Millisecond)
	}
	return listening, ready, fmt.Errorf("extender not ready after %s (last: %s)", timeout, last)
}

// startScheduler starts kube-scheduler with the shipped configuration (its
// profiles included), pointed at the rig's extender.
func (r *faultRig) startScheduler() {
	orig, err := r.c.SchedulerConfigMap(r.c.ExtPort)
	if err != nil {
		r.t.Fatal(err)
	}
	_, err = r.c.StartExtraScheduler("kube-scheduler", "default-scheduler", func(cfg map[string]interface{}) error {
		cfg["profiles"] = orig["profiles"]
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// scrape reads the extender's /metrics: value by metric line (name with
// labels). An extender that does not answer gives an empty map.
func (r *faultRig) scrape() map[string]float64 {
	out := map[string]float64{}
	resp, err := r.client.Get(r.debugURL + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// counters are the extender's counters summed over its processes so far.
func (r *faultRig) counters() map[string]float64 {
	out := map[string]float64{}
	for k, v := range r.scrape() {
		if strings.Contains(k, "_total") {
			out[k] = v
		}
	}
	for k, v := range r.gone {
		out[k] += v
	}
	return out
}

// killExtender kills the extender (SIGKILL) right after a last scrape of its
// counters.
func (r *faultRig) killExtender() {
	for k, v := range r.scrape() {
		if strings.Contains(k, "_total") {
			r.gone[k] += v
		}
	}
	r.ext.Kill()
}

// faultPod is the spec of the i-th pod of a phase: one GPU; every fourth also
// 4 pinned CPUs (Guaranteed, numa guaranteed).
func faultPod(name string, i int) podSpec {
	ps := podSpec{name: name, gpus: 1, cpu: "1", memory: "1Gi"}
	if i%4 == 0 {
		ps.cpu, ps.memory, ps.guaranteed, ps.affinity, ps.mode = "4", "4Gi", true, "numa", "guaranteed"
	}
	return ps
}

// createPod creates a pool pod, retrying while the API server is away (an
// earlier try that was written counts).
func (r *faultRig) createPod(ps podSpec, deadline time.Time) error {
	obj := r.pool.podObject(ps)
	for {
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := r.c.Client.CoreV1().Pods(r.pool.ns).Create(cx, obj, metav1.CreateOptions{})
		cancel()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("create pod %s: %w", ps.name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deletePod deletes a pool pod at once (grace 0), retrying while the API
// server is away.
func (r *faultRig) deletePod(name string, deadline time.Time) error {
	zero := int64(0)
	for {
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := r.c.Client.CoreV1().Pods(r.pool.ns).Delete(cx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		cancel()
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("delete pod %s: %w", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// churn starts, in the background, the replacement of k pool pods: 16
// workers each delete an old pod (chosen at random) and create a new one;
// every eighth job also creates a short-lived pod first and deletes it
// after its own replacement. It returns at once; the channel gives the
// first error (or nil) when all is done.
func (r *faultRig) churn(prefix string, k int, ph *faultPhase) <-chan error {
	r.rng.Shuffle(len(r.live), func(i, j int) { r.live[i], r.live[j] = r.live[j], r.live[i] })
	old := append([]string(nil), r.live[:k]...)
	r.live = r.live[k:]
	ph.pods += k
	ph.deleted += k
	deadline := time.Now().Add(5 * time.Minute)
	done := make(chan error, 1)
	start := time.Now()
	var mu sync.Mutex
	var ghosts int
	go func() {
		err := harness.Parallel(k, 16, func(i int) error {
			ghost := ""
			if i%8 == 0 {
				ghost = fmt.Sprintf("%s-ghost-%04d", prefix, i)
				if err := r.createPod(faultPod(ghost, i+1), deadline); err != nil {
					return err
				}
			}
			if err := r.deletePod(old[i], deadline); err != nil {
				return err
			}
			if err := r.createPod(faultPod(fmt.Sprintf("%s-%04d", prefix, i), i), deadline); err != nil {
				return err
			}
			if ghost != "" {
				mu.Lock()
				ghosts++
				mu.Unlock()
				return r.deletePod(ghost, deadline)
			}
			return nil
		})
		ph.created += time.Since(start)
		ph.pods += ghosts
		ph.deleted += ghosts
		done <- err
	}()
	for i := 0; i < k; i++ {
		r.live = append(r.live, fmt.Sprintf("%s-%04d", prefix, i))
	}
	return done
}

// waitBinds waits until the extender has bound n more pods than `since`
// (counters summed over its processes).
func (r *faultRig) waitBinds(since, n float64, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r.counters()[mBound]-since >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatalf("the extender did not bind %.0f pods within %s", n, timeout)
}

// waitAllBound waits until no pool pod is unbound and returns when; the
// API server may be away meanwhile.
func (r *faultRig) waitAllBound(phase string, timeout time.Duration) time.Time {
	t := r.t
	deadline := time.Now().Add(timeout)
	last := "no list yet"
	for {
		if err := r.ext.CheckAlive(); err != nil {
			t.Fatal(err)
		}
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := r.c.Client.CoreV1().Pods(r.pool.ns).List(cx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
		cancel()
		if err == nil && len(l.Items) == 0 {
			return time.Now()
		}
		if err != nil {
			last = err.Error()
		} else {
			var b strings.Builder
			for i := range l.Items {
				if i == 5 {
					fmt.Fprintf(&b, "\n  ... %d more", len(l.Items)-i)
					break
				}
				fmt.Fprintf(&b, "\n  %s: %s", l.Items[i].Name, podConditionText(&l.Items[i]))
			}
			last = fmt.Sprintf("%d pods unbound:%s", len(l.Items), b.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not every pod bound after %s; %s\nextender metrics: %v", phase, timeout, last, r.scrape())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func bindTimeout() time.Duration {
	return time.Duration(envInt("FLEXTOPO_E2E_FAULT_BIND_TIMEOUT_S", 120)) * time.Second
}

// burst creates n pods at once (32 workers) onto the empty pool of n GPUs.
func (r *faultRig) burst(n int) *faultPhase {
	ph := &faultPhase{name: "burst", pods: n, before: r.counters()}
	deadline := time.Now().Add(5 * time.Minute)
	start := time.Now()
	names := make([]string, n)
	err := harness.Parallel(n, 32, func(i int) error {
		names[i] = fmt.Sprintf("burst-%04d", i)
		return r.createPod(faultPod(names[i], i), deadline)
	})
	ph.created = time.Since(start)
	if err != nil {
		r.t.Fatal(err)
	}
	r.live = append(r.live, names...)
	ph.bound = r.waitAllBound(ph.name, bindTimeout()).Sub(start)
	ph.after = r.counters()
	r.t.Logf("burst: %d pods created in %s, all bound onto %d GPUs %s after the first create (%.1f pods/s)",
		n, ph.created.Round(time.Millisecond), n, ph.bound.Round(time.Millisecond), float64(n)/ph.bound.Seconds())
	r.checkInvariants(ph.name)
	return ph
}

// extenderKill replaces k pods and kills the extender a quarter of the way
// through; a new one starts at once on the same ports.
func (r *faultRig) extenderKill(k int) *faultPhase {
	ph := &faultPhase{name: "extender-kill", before: r.counters()}
	start := time.Now()
	done := r.churn("xk", k, ph)
	r.waitBinds(ph.before[mBound], float64(k/4), 2*time.Minute)
	r.killExtender()
	killed := time.Now()
	r.startExtender()
	listening, ready, err := r.waitExtenderReady(60 * time.Second)
	if err != nil {
		r.t.Fatal(err)
	}
	ph.notes = append(ph.notes, fmt.Sprintf("killed after %.0f binds; listening %s and in sync %s after the kill",
		r.gone[mBound]-ph.before[mBound], listening.Sub(killed).Round(time.Millisecond), ready.Sub(killed).Round(time.Millisecond)))
	r.t.Logf("extender-kill: new extender's lists: %s", listTimes(r.ext.LogPath))
	if err := <-done; err != nil {
		r.t.Fatal(err)
	}
	ph.bound = r.waitAllBound(ph.name, bindTimeout()).Sub(start)
	ph.after = r.counters()
	r.checkInvariants(ph.name)
	return ph
}

// apiServerKills replaces k pods in `kills` waves, and a quarter of the way
// through each wave kills kube-apiserver (SIGKILL) and starts it again on
// its port.
func (r *faultRig) apiServerKills(k, kills int) *faultPhase {
	ph := &faultPhase{name: "apiserver-kill", before: r.counters()}
	port := apiPort(r.t, r.c)
	start := time.Now()
	wave := max(1, k/kills)
	var windows []string
	for i := 0; i < kills; i++ {
		since := r.counters()[mBound]
		done := r.churn(fmt.Sprintf("ak%d", i), wave, ph)
		r.waitBinds(since, float64(max(1, wave/4)), 2*time.Minute)
		down := time.Now()
		r.c.APIServer.Kill()
		r.c.APIServer.Stop(0)
		if err := r.c.StartAPIServerOn(r.c.Testenv, port); err != nil {
			r.t.Fatal(err)
		}
		up := time.Now()
		_, ready, err := r.waitExtenderReady(2 * time.Minute)
		if err != nil {
			r.t.Fatal(err)
		}
		windows = append(windows, fmt.Sprintf("API server ready %s and extender in sync %s after the kill",
			up.Sub(down).Round(time.Millisecond), ready.Sub(down).Round(time.Millisecond)))
		if err := <-done; err != nil {
			r.t.Fatal(err)
		}
	}
	ph.notes = append(ph.notes, fmt.Sprintf("%d kills: %s", kills, strings.Join(windows, "; ")))
	ph.bound = r.waitAllBound(ph.name, bindTimeout()).Sub(start)
	ph.after = r.counters()
	r.checkInvariants(ph.name)
	return ph
}

// etcdFreeze replaces k pods and stops etcd (SIGSTOP) for `freeze` a quarter
// of the way through, then continues it. Meanwhile it asks the extender's
// /filter what it is asked between binds, to see whether a bind waiting on
// the API server delays it. The probe connects from 127.0.0.2: while etcd
// is frozen, kube-scheduler's binds wait on 127.0.0.1 connections, and
// once maxConnectionsPerClient of them are in flight the extender closes
// that address's new connections (the summary's cap column counts them),
// which would fail the probe for a reason other than the one it measures.
func (r *faultRig) etcdFreeze(k int, freeze time.Duration) *faultPhase {
	ph := &faultPhase{name: "etcd-freeze", before: r.counters()}
	start := time.Now()
	done := r.churn("ef", k, ph)
	r.waitBinds(ph.before[mBound], float64(k/4), 2*time.Minute)
	if err := r.c.Etcd.Signal(syscall.SIGSTOP); err != nil {
		r.t.Fatal(err)
	}
	frozen := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := r.c.Etcd.Signal(syscall.SIGCONT); err != nil {
				r.t.Error(err)
			}
		}
	}
	defer resume()
	var probes, refused int
	var slowest time.Duration
	probe := clientFrom("127.0.0.2")
	for time.Since(frozen) < freeze {
		t0 := time.Now()
		_, _, refusal, err := filterReply(probe, r.url, r.nodes[:1])
		if err != nil {
			r.t.Errorf("etcd-freeze: /filter while etcd is frozen: %v", err)
		}
		if refusal != "" {
			refused++
		}
		probes++
		slowest = max(slowest, time.Since(t0))
		time.Sleep(100 * time.Millisecond)
	}
	resume()
	unknown := r.counters()[mUnknown] - ph.before[mUnknown]
	ph.notes = append(ph.notes, fmt.Sprintf("etcd frozen %s, %.0f binds of unknown outcome by then; %d filters meanwhile (%d refused), slowest %s",
		time.Since(frozen).Round(time.Millisecond), unknown, probes, refused, slowest.Round(time.Millisecond)))
	if err := <-done; err != nil {
		r.t.Fatal(err)
	}
	end := r.waitAllBound(ph.name, bindTimeout())
	ph.bound = end.Sub(start)
	ph.notes = append(ph.notes, fmt.Sprintf("all bound %s after etcd resumed", end.Sub(frozen.Add(freeze)).Round(time.Millisecond)))
	ph.after = r.counters()
	r.checkInvariants(ph.name)
	return ph
}

// clientFrom is an HTTP client whose connections leave from `ip`, a
// loopback address of its own, so that the extender counts them apart
// from kube-scheduler's.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// units are the GPUs (indexes) and pinned CPUs one pod holds on a node.
type units struct {
	gpus []int
	cpus string // normalised cpulist
}

func (u units) String() string { return fmt.Sprintf("gpus %v cpus %q", u.gpus, u.cpus) }

func cpuListText(cpus map[int]bool) string {
	ids := make([]string, 0, len(cpus))
	keys := make([]int, 0, len(cpus))
	for c := range cpus {
		keys = append(keys, c)
	}
	sort.Ints(keys)
	for _, c := range keys {
		ids = append(ids, strconv.Itoa(c))
	}
	return strings.Join(ids, ",")
}

// nodeTopo is what the invariants need of a node's topology annotation.
type nodeTopo struct {
	gpuIndex map[string]int // uuid -> index
	cpus     map[int]bool
}

// annotatedUnits reads every node and pod from the API server and checks
// the allocations of the bound pods: each GPU pod has one, naming its node
// and GPUs of that node's topology, with the GPUs it asked for and, when
// Guaranteed with numa affinity, as many pinned CPUs as it requested; no
// GPU and no pinned CPU is held by two pods. It returns the units per node
// and pod uid (pods that hold any).
func (r *faultRig) annotatedUnits(phase string) map[string]map[string]units {
	t := r.t
	cx := harness.Ctx(t, 60*time.Second)
	nl, err := r.c.Client.CoreV1().Nodes().List(cx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("%s: list nodes: %v", phase, err)
	}
	topos := map[string]*nodeTopo{}
	for i := range nl.Items {
		n := &nl.Items[i]
		var topo flextopo.Topology
		if err := json.Unmarshal([]byte(n.Annotations[flextopo.AnnTopology]), &topo); err != nil {
			t.Fatalf("%s: node %s topology: %v", phase, n.Name, err)
		}
		nt := &nodeTopo{gpuIndex: map[string]int{}, cpus: map[int]bool{}}
		flextopo.ForEachGPU(&topo, func(_ int, g *flextopo.GPU) { nt.gpuIndex[g.UUID] = g.Index })
		for _, id := range topo.NUMAIDs() {
			for c := range topo.NUMACPUs(id) {
				nt.cpus[c] = true
			}
		}
		topos[n.Name] = nt
	}
	pl, err := r.c.Client.CoreV1().Pods("").List(cx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("%s: list pods: %v", phase, err)
	}
	want := map[string]map[string]units{}
	gpuOwner, cpuOwner := map[string]string{}, map[string]string{}
	bad := 0
	fail := func(format string, args ...interface{}) {
		if bad++; bad <= 20 {
			t.Errorf(phase+": "+format, args...)
		}
	}
	gpuPods := 0
	for i := range pl.Items {
		pod := &pl.Items[i]
		node := pod.Spec.NodeName
		if node == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		var asked int64
		for _, c := range pod.Spec.Containers {
			if q, ok := c.Resources.Limits[flextopo.ResGPU]; ok {
				asked += q.Value()
			}
		}
		raw := pod.Annotations[flextopo.AnnAllocation]
		if raw == "" {
			if asked > 0 {
				fail("pod %s is bound to %s with %d GPUs and no allocation", key, node, asked)
			}
			continue
		}
		gpuPods++
		var a flextopo.Allocation
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			fail("pod %s: allocation %q: %v", key, raw, err)
			continue
		}
		if a.Node != node {
			fail("pod %s is bound to %s, its allocation names %s", key, node, a.Node)
		}
		topo := topos[node]
		if topo == nil {
			fail("pod %s is bound to %s, a node without a topology", key, node)
			continue
		}
		if int64(len(a.GPUs)) != asked || len(a.GPUIndexes) != len(a.GPUs) {
			fail("pod %s asked %d GPUs, its allocation has gpus %v gpuIndexes %v", key, asked, a.GPUs, a.GPUIndexes)
		}
		var u units
		for j, uuid := range a.GPUs {
			idx, ok := topo.gpuIndex[uuid]
			if !ok {
				fail("pod %s on %s: GPU %s is not in the node's topology", key, node, uuid)
				continue
			}
			if j < len(a.GPUIndexes) && a.GPUIndexes[j] != idx {
				fail("pod %s on %s: GPU %s has index %d, the allocation says %d", key, node, uuid, idx, a.GPUIndexes[j])
			}
			if other, dup := gpuOwner[node+"/"+uuid]; dup {
				fail("GPU %s of %s is held by %s and %s", uuid, node, other, key)
			}
			gpuOwner[node+"/"+uuid] = key
			u.gpus = append(u.gpus, idx)
		}
		sort.Ints(u.gpus)
		cpus, err := flextopo.ParseCPUList(a.CPUSet)
		if err != nil {
			fail("pod %s: %v", key, err)
		}
		for c := range cpus {
			if !topo.cpus[c] {
				fail("pod %s on %s: CPU %d is not in the node's topology", key, node, c)
			}
			if other, dup := cpuOwner[fmt.Sprintf("%s/%d", node, c)]; dup {
				fail("CPU %d of %s is pinned by %s and %s", c, node, other, key)
			}
			cpuOwner[fmt.Sprintf("%s/%d", node, c)] = key
		}
		if pod.Status.QOSClass == corev1.PodQOSGuaranteed && pod.Annotations[flextopo.AnnAffinity] == "numa" {
			if q := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; int64(len(cpus)) != q.Value() {
				fail("pod %s: Guaranteed with %s CPUs, its allocation pins %q", key, q.String(), a.CPUSet)
			}
		}
		u.cpus = cpuListText(cpus)
		if len(u.gpus) == 0 && u.cpus == "" {
			continue
		}
		if want[node] == nil {
			want[node] = map[string]units{}
		}
		want[node][string(pod.UID)] = u
	}
	if bad > 20 {
		t.Errorf("%s: %d more violations", phase, bad-20)
	}
	t.Logf("%s: %d bound pods with allocations, %d GPUs and %d pinned CPUs held, none twice by the annotations",
		phase, gpuPods, len(gpuOwner), len(cpuOwner))
	return want
}

// debugHeld is the units per pod uid that the extender's /debug/nodes/{name}
// says each pod holds on a node; it also returns what is off in the row.
func (r *faultRig) debugHeld(node string) (map[string]units, []string, error) {
	var d struct {
		AssumedPods int `json:"assumedPods"`
		Conflicts   int `json:"conflicts"`
		GPUs        *struct {
			Used    int `json:"used"`
			Unknown int `json:"unknown"`
		} `json:"gpus"`
		Holdings []struct {
			Namespace   string `json:"namespace"`
			Name        string `json:"name"`
			UID         string `json:"uid"`
			Assumed     bool   `json:"assumed"`
			GPUs        []int  `json:"gpus"`
			CPUs        string `json:"cpus"`
			UnknownGpus int    `json:"unknownGpus"`
			UnknownCpus int    `json:"unknownCpus"`
		} `json:"holdings"`
	}
	resp, err := r.client.Get(r.debugURL + "/debug/nodes/" + node)
	if err != nil {
		return nil, nil, err
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET /debug/nodes/%s: HTTP %d: %s", node, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, nil, fmt.Errorf("GET /debug/nodes/%s: %v", node, err)
	}
	var off []string
	if d.AssumedPods != 0 {
		off = append(off, fmt.Sprintf("%d assumed pods", d.AssumedPods))
	}
	if d.Conflicts != 0 {
		off = append(off, fmt.Sprintf("%d conflicts", d.Conflicts))
	}
	held := map[string]units{}
	gpus := 0
	for _, h := range d.Holdings {
		if h.UnknownGpus != 0 || h.UnknownCpus != 0 {
			off = append(off, fmt.Sprintf("pod %s/%s holds %d GPUs and %d CPUs of unknown placement", h.Namespace, h.Name, h.UnknownGpus, h.UnknownCpus))
		}
		cpus, err := flextopo.ParseCPUList(h.CPUs)
		if err != nil {
			return nil, nil, fmt.Errorf("node %s pod %s/%s: %v", node, h.Namespace, h.Name, err)
		}
		u := units{gpus: append([]int(nil), h.GPUs...), cpus: cpuListText(cpus)}
		sort.Ints(u.gpus)
		gpus += len(u.gpus)
		if len(u.gpus) == 0 && u.cpus == "" {
			continue
		}
		held[h.UID] = u
	}
	if d.GPUs != nil && (d.GPUs.Used != gpus || d.GPUs.Unknown != 0) {
		off = append(off, fmt.Sprintf("gpus used %d unknown %d, holdings name %d", d.GPUs.Used, d.GPUs.Unknown, gpus))
	}
	return held, off, nil
}

// debugDiff compares the extender's view of every node with the annotations.
func (r *faultRig) debugDiff(want map[string]map[string]units, nodes []string) ([]string, error) {
	var diff []string
	for _, node := range nodes {
		held, off, err := r.debugHeld(node)
		if err != nil {
			return nil, err
		}
		for _, o := range off {
			diff = append(diff, node+": "+o)
		}
		for uid, w := range want[node] {
			h, ok := held[uid]
			switch {
			case !ok:
				diff = append(diff, fmt.Sprintf("%s: pod %s holds %s by its annotation, nothing in /debug", node, uid, w))
			case !sameInts(h.gpus, w.gpus) || h.cpus != w.cpus:
				diff = append(diff, fmt.Sprintf("%s: pod %s holds %s by its annotation, %s in /debug", node, uid, w, h))
			}
		}
		for uid, h := range held {
			if _, ok := want[node][uid]; !ok {
				diff = append(diff, fmt.Sprintf("%s: /debug says pod %s holds %s, no annotation does", node, uid, h))
			}
		}
	}
	var c struct {
		ConflictPods   int               `json:"conflictPods"`
		ConflictsFound int               `json:"conflictsFound"`
		Conflicts      []json.RawMessage `json:"conflicts"`
	}
	resp, err := r.client.Get(r.debugURL + "/debug/conflicts")
	if err != nil {
		return nil, err
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("GET /debug/conflicts: %v: %s", err, raw)
	}
	if c.ConflictPods != 0 || c.ConflictsFound != 0 || len(c.Conflicts) != 0 {
		diff = append(diff, fmt.Sprintf("/debug/conflicts: %s", raw))
	}
	return diff, nil
}

// checkInvariants checks the annotations (annotatedUnits), then polls the
// extender until its debug view of every node equals them: the same units
// per pod, no assumption left, no conflict. The view follows the API
// server through a watch, so it may trail it for a moment.
func (r *faultRig) checkInvariants(phase string) {
	t := r.t
	want := r.annotatedUnits(phase)
	nl, err := r.c.Client.CoreV1().Nodes().List(harness.Ctx(t, 30*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, n := range nl.Items {
		nodes = append(nodes, n.Name)
	}
	if n := r.counters()[mConflict]; n != 0 {
		t.Errorf("%s: the extender found %.0f allocation conflicts", phase, n)
	}
	start := time.Now()
	deadline := start.Add(90 * time.Second)
	for {
		diff, err := r.debugDiff(want, nodes)
		if err == nil && len(diff) == 0 {
			t.Logf("%s: the extender's /debug view of %d nodes equals the annotations (%s to settle); no conflicts",
				phase, len(nodes), time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("%s: %v", phase, err)
			}
			if len(diff) > 20 {
				diff = append(diff[:20], fmt.Sprintf("... %d more", len(diff)-20))
			}
			t.Fatalf("%s: the extender's /debug view differs from the annotations after %s:\n%s\nmetrics: %v",
				phase, time.Since(start).Round(time.Millisecond), strings.Join(diff, "\n"), r.scrape())
		}
		time.Sleep(250 * time.Millisecond)
	}
}
