package study

// The FGD paper's comparison at cluster scale with real components: a
// compressed day of co-located LLM work (workload_test.go) on
// hundreds of kwok nodes with the reference servers' topologies, replayed
// once per arm with the same workload and seed:
//
//	(a) kube-scheduler + flextopo with its preempt verb;
//	(b) kube-scheduler + flextopo without it (kube-scheduler's own victims,
//	    flextopo still filtering, scoring and binding);
//	(c) kube-scheduler alone (no topology).
//
// Each arm gets a fresh etcd and kube-apiserver, kwok, its kube-scheduler and
// (a, b) its own extender (cluster_test.go). Figures and plots come from
// metrics_test.go; bench/README.md defines them.
//
// TestPreemptionStudy runs the study when FLEXTOPO_STUDY is set
// (scripts/preemption-study.sh): "nodes=1000,wall=360s,seed=1,source=synthetic"
// (keys optional; source synthetic or openb; openb reads
// FLEXTOPO_OPENB, default ../shared/data/openb/csv/openb_pod_list_default.csv
// beside the repository); FLEXTOPO_STUDY_OUT names the folder for the table
// and the SVG plots. TestPreemptionStudySmall is the CI configuration: 100
// nodes, 60 s per arm, asserting invariants only.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const (
	armFlextopo  = "flextopo"
	armNoPreempt = "nopreempt"
	armAlone     = "alone"
)

type studyConfig struct {
	nodes    int
	wall     time.Duration // per arm
	seed     int64
	source   string
	deadline time.Duration // an online pod placed later than this is not "on time"
	grace    int64         // batch pods' terminationGracePeriodSeconds (wall; 1 s is the least that is still graceful)
	queue    int           // batch pods pending at most
	arms     []string
}

func parseStudyConfig(spec string) (studyConfig, error) {
	c := studyConfig{nodes: 1000, wall: 360 * time.Second, seed: 1, source: "synthetic", deadline: 30 * time.Second,
		grace: 1, arms: []string{armFlextopo, armNoPreempt, armAlone}}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			if strings.TrimSpace(kv) == "" || strings.TrimSpace(kv) == "1" {
				continue
			}
			return c, fmt.Errorf("%q is not key=value", kv)
		}
		var err error
		switch k {
		case "nodes":
			c.nodes, err = strconv.Atoi(v)
		case "wall":
			c.wall, err = time.ParseDuration(v)
		case "seed":
			c.seed, err = strconv.ParseInt(v, 10, 64)
		case "source":
			c.source = v
			if v != "synthetic" && v != "openb" {
				err = fmt.Errorf("source %q: synthetic or openb", v)
			}
		case "deadline":
			c.deadline, err = time.ParseDuration(v)
		case "arms":
			c.arms = strings.Split(v, "+")
		default:
			err = fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// TestPreemptionStudy is the full study; see the top of the file.
func TestPreemptionStudy(t *testing.T) {
	spec := os.Getenv("FLEXTOPO_STUDY")
	if spec == "" {
		t.Skip("FLEXTOPO_STUDY not set (scripts/preemption-study.sh runs the study)")
	}
	cfg, err := parseStudyConfig(spec)
	if err != nil {
		t.Fatalf("FLEXTOPO_STUDY: %v", err)
	}
	figs := runStudy(t, cfg)
	if out := os.Getenv("FLEXTOPO_STUDY_OUT"); out != "" {
		writeStudyReport(t, out, cfg, figs)
	}
}

// TestPreemptionStudySmall runs the three arms on 100 nodes for a minute
// each and checks invariants only: no GPU or MIG instance held twice, every
// victim of lower priority than its preemptor, every arm ran to its end
// with its components alive and its pods placed and run by kwok.
func TestPreemptionStudySmall(t *testing.T) {
	cfg := studyConfig{nodes: 100, wall: 60 * time.Second, seed: 1, source: "synthetic", deadline: 30 * time.Second,
		grace: 1, arms: []string{armFlextopo, armNoPreempt, armAlone}}
	figs := runStudy(t, cfg)
	for _, f := range figs {
		if len(f.violations) > 0 {
			t.Errorf("%s: GPUs held twice (%d), first: %s", f.arm, len(f.violations), strings.Join(f.violations[:min(5, len(f.violations))], "; "))
		}
		if len(f.victimNotLower) > 0 {
			t.Errorf("%s: victims not of lower priority: %s", f.arm, strings.Join(f.victimNotLower, "; "))
		}
		if f.online == 0 || f.onlinePlaced == 0 || f.batchRan == 0 || f.batchDone == 0 {
			t.Errorf("%s: the run did not complete: %d online created, %d placed; %d batch ran, %d finished",
				f.arm, f.online, f.onlinePlaced, f.batchRan, f.batchDone)
		}
		if f.arm != armAlone && f.boundNoAlloc > 0 {
			t.Errorf("%s: %d online pods bound without an allocation", f.arm, f.boundNoAlloc)
		}
	}
	for _, f := range figs {
		t.Logf("%s: victims removed by kwok p50 %.1f s, max %.1f s after their eviction (grace %d s)",
			f.arm, harness.Percentile(f.victimGrace, 50), harness.Percentile(f.victimGrace, 100), cfg.grace)
	}
	t.Logf("small study (figures not asserted):\n%s", studyTable(figs, cfg.deadline))
}

func runStudy(t *testing.T, cfg studyConfig) []*armFigures {
	c := requireExtender(t)
	kwokBin := kwokBinary()
	if kwokBin == "" {
		t.Skip("KWOK is not set to an executable kwok (scripts/e2e.sh builds it)")
	}
	nodes, err := studyNodes(c.RepoRoot, cfg.nodes)
	if err != nil {
		t.Fatal(err)
	}
	var gpuCap float64
	mig := false
	for _, n := range nodes {
		gpuCap += gpuEquivalents(n.topo)
		mig = mig || n.kind == kindH100
	}
	var wl *studyWorkload
	switch cfg.source {
	case "openb":
		path := os.Getenv("FLEXTOPO_OPENB")
		if path == "" {
			path = filepath.Join(c.RepoRoot, "..", "shared", "data", "openb", "csv", "openb_pod_list_default.csv")
		}
		if wl, err = openbWorkload(path, cfg.seed, gpuCap); err != nil {
			t.Fatalf("openb workload: %v", err)
		}
	default:
		wl = syntheticWorkload(cfg.seed, gpuCap, mig)
	}
	if cfg.queue == 0 {
		cfg.queue = max(10, cfg.nodes/20)
	}
	t.Logf("study: %d nodes (%.0f GPU equivalents), %s per arm (1 simulated day, compression %.0fx); %s",
		cfg.nodes, gpuCap, cfg.wall, wl.simSeconds/cfg.wall.Seconds(), wl.describe)
	var figs []*armFigures
	for _, arm := range cfg.arms {
		arm := arm
		t.Run(arm, func(t *testing.T) {
			figs = append(figs, runStudyArm(t, cfg, arm, nodes, wl, gpuCap))
		})
	}
	t.Logf("study table (%d nodes, seed %d, %s):\n%s", cfg.nodes, cfg.seed, cfg.source, studyTable(figs, cfg.deadline))
	return figs
}

// studyPodObject is the pod of p for the study's scheduler.
func studyPodObject(p *studyPod, compression float64, grace int64) *corev1.Pod {
	q := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	req := corev1.ResourceList{
		corev1.ResourceCPU:    q(int64(p.cpu)),
		corev1.ResourceMemory: *resource.NewQuantity(int64(p.memGi)<<30, resource.BinarySI),
	}
	lim := corev1.ResourceList{}
	if p.online {
		lim = req.DeepCopy() // Guaranteed: the CPUs are pinned
	}
	if p.mig != "" {
		name := corev1.ResourceName("nvidia.com/mig-" + p.mig)
		req[name], lim[name] = q(1), q(1)
	} else {
		req[flextopo.ResGPU], lim[flextopo.ResGPU] = q(int64(p.gpus)), q(int64(p.gpus))
	}
	runFor := time.Duration(p.life / compression * float64(time.Second)).Round(time.Millisecond)
	ann := map[string]string{annRunFor: runFor.String()}
	class := pcStudyBatch
	g := grace
	if p.online {
		ann[flextopo.AnnAffinity], ann[flextopo.AnnAffinityMode] = p.affinity, p.mode
		class = pcStudyOnline
		g = 1
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: studyNS, Annotations: ann,
			Labels: map[string]string{"e2e.flextopo.io/class": p.kind}},
		Spec: corev1.PodSpec{
			SchedulerName:                 studySched,
			PriorityClassName:             class,
			TerminationGracePeriodSeconds: &g,
			RestartPolicy:                 corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: harness.PauseImage,
				Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}},
		},
	}
}

// runStudyArm replays the workload on a fresh cluster under one arm.
func runStudyArm(t *testing.T, cfg studyConfig, arm string, nodes []studyNode, wl *studyWorkload, gpuCap float64) *armFigures {
	dir, err := os.MkdirTemp(env.WorkDir, "study-"+arm+"-")
	if err != nil {
		t.Fatal(err)
	}
	sc := startStudyControlPlane(t, dir, env.Testenv)
	sc.addNodes(t, nodes, kwokBinary())
	sc.startArm(t, arm)
	compression := wl.simSeconds / cfg.wall.Seconds()

	rec := newStudyRecorder()
	factory := informers.NewSharedInformerFactoryWithOptions(sc.client, 0, informers.WithNamespace(studyNS))
	podInf := factory.Core().V1().Pods().Informer()
	_, err = podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { rec.observe(obj.(*corev1.Pod), false) },
		UpdateFunc: func(_, obj interface{}) { rec.observe(obj.(*corev1.Pod), false) },
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				rec.observe(p, true)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	evInf := factory.Core().V1().Events().Informer()
	_, err = evInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { rec.observeEvent(obj.(*corev1.Event)) },
		UpdateFunc: func(_, obj interface{}) { rec.observeEvent(obj.(*corev1.Event)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	start := time.Now()
	end := start.Add(cfg.wall)
	var wg sync.WaitGroup
	var createErrs sync.Map
	create := func(p *studyPod) {
		cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		created, err := sc.client.CoreV1().Pods(studyNS).Create(cx, studyPodObject(p, compression, cfg.grace), metav1.CreateOptions{})
		if err != nil {
			createErrs.Store(p.name, err.Error())
			return
		}
		rec.created(p, created.UID, time.Now())
	}
	// Online arrivals at their compressed times, through a few workers so
	// that a burst (the trough's load at the start) does not delay the rest.
	onlineCh := make(chan *studyPod, 64)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range onlineCh {
				create(p)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(onlineCh)
		for i := range wl.online {
			p := &wl.online[i]
			at := start.Add(time.Duration(p.at / compression * float64(time.Second)))
			if at.After(end) {
				return
			}
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			onlineCh <- p
		}
	}()
	// The batch queue, the reaper of finished pods, the sampler.
	nextBatch := 0
	reaped := map[string]bool{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastSample := time.Time{}
	byDevice := arm != armAlone
	for now := range tick.C {
		if err := sc.alive(); err != nil {
			t.Fatalf("%s: a component exited during the run: %v", arm, err)
		}
		if now.After(end) {
			break
		}
		for n := rec.pendingBatch(); n < cfg.queue && nextBatch < len(wl.batch); n++ {
			create(&wl.batch[nextBatch])
			nextBatch++
		}
		if now.Sub(lastSample) >= 2*time.Second {
			rec.sample(now.Sub(start).Seconds(), sc, byDevice)
			lastSample = now
			reap(sc, rec, reaped)
		}
	}
	wg.Wait()
	rec.sample(time.Since(start).Seconds(), sc, byDevice)
	n := 0
	createErrs.Range(func(k, v interface{}) bool {
		if n < 5 {
			t.Logf("%s: create %s: %s", arm, k, v)
		}
		n++
		return true
	})
	if n > 0 {
		t.Errorf("%s: %d pods could not be created", arm, n)
	}
	f := rec.figures(arm, sc, start, cfg.wall, compression, cfg.deadline, gpuCap)
	t.Logf("%s: %d online pods, %d batch jobs submitted; %d preemptors, %d evictions; %d samples",
		arm, f.online, f.batchCreated, f.preemptors, f.evictions, len(f.samples))
	if os.Getenv("FLEXTOPO_STUDY_DEBUG") != "" {
		t.Logf("%s: preemptors:\n%s", arm, strings.Join(f.preemptDetail, "\n"))
	}
	if len(rec.unresolved) > 0 {
		t.Logf("%s: %d Preempted events without a readable preemptor, first: %s", arm, len(rec.unresolved), rec.unresolved[0])
	}
	return f
}

// reap deletes finished pods (as a Job's TTL would), after the recorder
// has seen them finish.
func reap(sc *studyCluster, rec *studyRecorder, done map[string]bool) {
	rec.mu.Lock()
	var names []string
	for name, p := range rec.pods {
		if !p.succeeded.IsZero() && p.gone.IsZero() && !done[name] {
			names = append(names, name)
			done[name] = true
		}
	}
	rec.mu.Unlock()
	zero := int64(0)
	_ = harness.Parallel(len(names), 8, func(i int) error {
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sc.client.CoreV1().Pods(studyNS).Delete(cx, names[i], metav1.DeleteOptions{GracePeriodSeconds: &zero})
		return nil
	})
}

// writeStudyReport writes the table and the plots into dir.
func writeStudyReport(t *testing.T, dir string, cfg studyConfig, figs []*armFigures) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("study-%s-%dn-seed%d", cfg.source, cfg.nodes, cfg.seed)
	var aligned, alloc []svgSeries
	for _, f := range figs {
		aligned = append(aligned, alignedSeries(f))
		alloc = append(alloc, allocSeries(f))
	}
	title := fmt.Sprintf("%s, %d nodes, seed %d", cfg.source, cfg.nodes, cfg.seed)
	if err := writeSVGChart(filepath.Join(dir, base+"-aligned.svg"),
		"Online pods Running at their requested level within "+cfg.deadline.String()+" ("+title+")",
		"simulated hour of creation", "% of online pods", 24, aligned); err != nil {
		t.Error(err)
	}
	if err := writeSVGChart(filepath.Join(dir, base+"-allocation.svg"), "GPU allocation ("+title+")",
		"simulated hour", "% of GPU capacity held", 24, alloc); err != nil {
		t.Error(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nodes %d, seed %d, source %s, %s per arm (compression %.0fx), deadline %s\n\n%s",
		cfg.nodes, cfg.seed, cfg.source, cfg.wall, 86400/cfg.wall.Seconds(), cfg.deadline, studyTable(figs, cfg.deadline))
	for _, f := range figs {
		fmt.Fprintf(&b, "\n%s: allocation level vs judge disagreements %d, bound without allocation %d, GPUs held twice %d, victims not lower %d, unresolved Preempted events %d, victims removed by kwok p50 %.1f s / max %.1f s after eviction (grace %d s, deletionTimestamp has whole seconds)",
			f.arm, f.judgeDisagrees, f.boundNoAlloc, len(f.violations), len(f.victimNotLower), f.unresolved,
			harness.Percentile(f.victimGrace, 50), harness.Percentile(f.victimGrace, 100), cfg.grace)
	}
	b.WriteString("\n")
	if err := os.WriteFile(filepath.Join(dir, base+".md"), []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
}
