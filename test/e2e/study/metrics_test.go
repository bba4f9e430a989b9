package study

// What the preemption study (study_test.go) measures: a recorder of every
// pod and preemption event of an arm, the alignment judge, the figures of
// one arm, the table and the SVG plots.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

// podRec is what the recorder knows of one pod, in wall time.
type podRec struct {
	spec      *studyPod
	uid       types.UID
	created   time.Time // when the driver's create returned
	bound     time.Time
	node      string
	running   time.Time
	succeeded time.Time
	evicted   time.Time // first deletionTimestamp or DisruptionTarget not asked by the driver
	gone      time.Time
	alloc     *flextopo.Allocation
	preemptor types.UID // when evicted by preemption
}

// live says whether the pod holds its devices: bound, not finished, not
// deleted (a victim in its grace period still holds them).
func (r *podRec) live() bool { return !r.bound.IsZero() && r.succeeded.IsZero() && r.gone.IsZero() }

// studyRecorder follows the arm's pods and Preempted events.
type studyRecorder struct {
	mu         sync.Mutex
	pods       map[string]*podRec
	byUID      map[types.UID]string
	preempted  map[string]types.UID // victim name -> preemptor UID, from events
	unresolved []string             // Preempted events whose preemptor could not be read
	violations []string             // invariant breaches seen while sampling
	pending    int                  // batch pods created and not bound
	samples    []allocSample
}

type allocSample struct {
	wall                 float64 // seconds since the arm's start
	online, batch, total float64 // GPU equivalents held
}

func newStudyRecorder() *studyRecorder {
	return &studyRecorder{pods: map[string]*podRec{}, byUID: map[types.UID]string{}, preempted: map[string]types.UID{}}
}

// created notes a pod the driver has created.
func (r *studyRecorder) created(p *studyPod, uid types.UID, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.pods[p.name]
	if rec == nil {
		rec = &podRec{}
		r.pods[p.name] = rec
	}
	rec.spec, rec.uid, rec.created = p, uid, at
	r.byUID[uid] = p.name
	if !p.online && rec.bound.IsZero() && rec.gone.IsZero() {
		r.pending++
	}
}

func (r *studyRecorder) pendingBatch() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending
}

// observe takes a pod from the watch.
func (r *studyRecorder) observe(p *corev1.Pod, deleted bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.pods[p.Name]
	if rec == nil {
		// The watch can be faster than the create call's return.
		rec = &podRec{}
		r.pods[p.Name] = rec
	}
	if rec.uid == "" {
		rec.uid = p.UID
		r.byUID[p.UID] = p.Name
	}
	wasPending := rec.spec != nil && !rec.spec.online && rec.bound.IsZero() && rec.gone.IsZero()
	if p.Spec.NodeName != "" && rec.bound.IsZero() {
		rec.bound, rec.node = now, p.Spec.NodeName
	}
	if raw := p.Annotations[flextopo.AnnAllocation]; raw != "" && rec.alloc == nil {
		var a flextopo.Allocation
		if json.Unmarshal([]byte(raw), &a) == nil {
			rec.alloc = &a
		}
	}
	if p.Status.Phase == corev1.PodRunning && rec.running.IsZero() {
		rec.running = now
	}
	if p.Status.Phase == corev1.PodSucceeded && rec.succeeded.IsZero() {
		rec.succeeded = now
	}
	if rec.evicted.IsZero() && rec.succeeded.IsZero() {
		dt := harness.PodCondition(p, corev1.DisruptionTarget)
		if p.DeletionTimestamp != nil || (dt != nil && dt.Status == corev1.ConditionTrue) {
			rec.evicted = now
		}
	}
	if deleted && rec.gone.IsZero() {
		rec.gone = now
	}
	if wasPending && (!rec.bound.IsZero() || !rec.gone.IsZero()) {
		r.pending--
	}
}

// preemptedRe reads kube-scheduler's Preempted event message
// ("Preempted by pod <uid> on node <node>").
var preemptedRe = regexp.MustCompile(`Preempted by pod ([0-9a-f-]{36})`)

// observeEvent takes an event of the namespace.
func (r *studyRecorder) observeEvent(e *corev1.Event) {
	if e.Reason != "Preempted" || e.InvolvedObject.Kind != "Pod" {
		return
	}
	var by types.UID
	if e.Related != nil && e.Related.UID != "" {
		by = e.Related.UID
	} else if m := preemptedRe.FindStringSubmatch(e.Message); m != nil {
		by = types.UID(m[1])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if by == "" {
		r.unresolved = append(r.unresolved, e.InvolvedObject.Name+": "+e.Message)
		return
	}
	if _, seen := r.preempted[e.InvolvedObject.Name]; !seen {
		r.preempted[e.InvolvedObject.Name] = by
	}
}

// sample records the GPUs held and checks that no GPU is held twice: by
// count against the node's capacity (every arm) and by device from the
// allocation annotations (arms with flextopo).
func (r *studyRecorder) sample(at float64, sc *studyCluster, byDevice bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := allocSample{wall: at}
	counts := map[string]map[string]float64{}
	holders := map[string]string{}
	for name, p := range r.pods {
		if p.spec == nil || !p.live() {
			continue
		}
		eq := p.spec.gpuEq()
		s.total += eq
		if p.spec.online {
			s.online += eq
		} else {
			s.batch += eq
		}
		res := flextopo.ResGPU
		if p.spec.mig != "" {
			res = "nvidia.com/mig-" + p.spec.mig
		}
		if counts[p.node] == nil {
			counts[p.node] = map[string]float64{}
		}
		if p.spec.mig != "" {
			counts[p.node][res]++
		} else {
			counts[p.node][res] += float64(p.spec.gpus)
		}
		if !byDevice || p.alloc == nil {
			continue
		}
		units := append([]string(nil), p.alloc.GPUs...)
		for _, m := range p.alloc.MIG {
			units = append(units, m.UUID)
		}
		for _, u := range units {
			if other, ok := holders[u]; ok {
				r.violations = append(r.violations, fmt.Sprintf("t=%.0fs: %s held by %s and %s", at, u, other, name))
			}
			holders[u] = name
		}
		if p.alloc.Node != p.node {
			r.violations = append(r.violations, fmt.Sprintf("t=%.0fs: %s bound to %s, allocation names %s", at, name, p.node, p.alloc.Node))
		}
	}
	for node, byRes := range counts {
		capacity := sc.devices[node]
		for res, n := range byRes {
			q := capacity[corev1.ResourceName(res)]
			if n > float64(q.Value()) {
				r.violations = append(r.violations, fmt.Sprintf("t=%.0fs: node %s: %v %s held, capacity %d", at, node, n, res, q.Value()))
			}
		}
	}
	r.samples = append(r.samples, s)
}

// topoIndex is where each GPU of a topology sits.
type gpuPlace struct {
	numa, socket, pcieSwitch int
	mig                      bool
	peers                    map[int]bool
}

func gpuPlaces(t *flextopo.Topology) (map[int]gpuPlace, map[int]map[int]bool, map[int]int) {
	places := map[int]gpuPlace{}
	numaCPUs := map[int]map[int]bool{}
	numaSocket := map[int]int{}
	add := func(g *flextopo.GPU, numa, socket, sw int) {
		p := gpuPlace{numa: numa, socket: socket, pcieSwitch: sw, mig: g.MIG != nil && g.MIG.Enabled, peers: map[int]bool{}}
		for _, l := range g.NVLinks {
			p.peers[l.Peer] = true
		}
		places[g.Index] = p
	}
	for si := range t.Sockets {
		s := &t.Sockets[si]
		for ni := range s.NUMANodes {
			n := &s.NUMANodes[ni]
			numaCPUs[n.ID], _ = flextopo.ParseCPUList(n.CPUs)
			numaSocket[n.ID] = s.ID
			for pi := range n.PCIeSwitches {
				for gi := range n.PCIeSwitches[pi].GPUs {
					add(&n.PCIeSwitches[pi].GPUs[gi], n.ID, s.ID, n.PCIeSwitches[pi].ID)
				}
			}
			for gi := range n.GPUs {
				add(&n.GPUs[gi], n.ID, s.ID, -1)
			}
		}
	}
	return places, numaCPUs, numaSocket
}

// judgeAligned says whether GPUs gpus with pinned CPUs cpus on topology t
// meet affinity level (docs/annotations.md, "What each affinity level
// requires"), judged from the topology alone, independently of the
// extender's own level.
func judgeAligned(t *flextopo.Topology, level string, gpus []int, cpus map[int]bool) bool {
	places, numaCPUs, numaSocket := gpuPlaces(t)
	allowed := map[int]bool{} // NUMA nodes the CPUs may sit in
	switch level {
	case "node", "":
		return true
	case "nvlink":
		for i, a := range gpus {
			for _, b := range gpus[i+1:] {
				if !places[a].peers[b] {
					return false
				}
			}
		}
		// The NUMA nodes of the NVLink group (connected component).
		seen := map[int]bool{}
		stack := append([]int(nil), gpus...)
		for len(stack) > 0 {
			g := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[g] {
				continue
			}
			seen[g] = true
			allowed[places[g].numa] = true
			for p := range places[g].peers {
				stack = append(stack, p)
			}
		}
	case "pcie-switch", "numa", "socket":
		key := func(p gpuPlace) int {
			switch level {
			case "pcie-switch":
				return p.pcieSwitch
			case "numa":
				return p.numa
			}
			return p.socket
		}
		for _, g := range gpus {
			if key(places[g]) != key(places[gpus[0]]) || (level == "pcie-switch" && places[g].pcieSwitch < 0) {
				return false
			}
		}
		if len(gpus) > 0 {
			for numa, s := range numaSocket {
				if (level == "socket" && s == places[gpus[0]].socket) || (level != "socket" && numa == places[gpus[0]].numa) {
					allowed[numa] = true
				}
			}
		}
	default:
		return false
	}
	for c := range cpus {
		ok := false
		for numa := range allowed {
			if numaCPUs[numa][c] {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// onlyAligned is the rule for arm (c), where kube-scheduler alone places
// the pod and no device assignment exists: the pod counts as aligned only
// when every set of whole GPUs and CPUs the node could hand it would be,
// that is when all the node's whole GPUs and all its CPUs form one domain
// of the level (an NVSwitch box for nvlink; never for numa on a
// multi-NUMA server).
func onlyAligned(t *flextopo.Topology, level string) bool {
	places, numaCPUs, _ := gpuPlaces(t)
	var gpus []int
	for idx, p := range places {
		if !p.mig {
			gpus = append(gpus, idx)
		}
	}
	sort.Ints(gpus)
	all := map[int]bool{}
	for _, cs := range numaCPUs {
		for c := range cs {
			all[c] = true
		}
	}
	return judgeAligned(t, level, gpus, all)
}

// armFigures are one arm's results.
type armFigures struct {
	arm, label             string
	wall                   time.Duration
	compression            float64
	online, onlinePlaced   int
	alignedEver, alignedOT int // placed at the requested level: at all / within the deadline
	neverRan               int
	p50, p99               float64 // creation to Running, wall seconds
	batchCreated, batchRan int
	batchDone              int
	preemptors, succeeded  int
	evictions, wasted      int
	elsewhere              int     // victims whose preemptor ran aligned, on another node
	lostGPUh               float64 // simulated GPU-hours of evicted work
	judgeDisagrees         int     // allocation level vs the judge (arms a, b)
	boundNoAlloc           int
	victimNotLower         []string
	violations             []string
	unresolved             int
	alignedByHour          [24][2]int // per simulated hour of creation: aligned on time, created
	samples                []allocSample
	gpuCap                 float64
	preemptDetail          []string  // the first preemptors, for the log
	victimGrace            []float64 // seconds from a victim's eviction to its removal by kwok
}

// aligned says whether online pod rec was placed at its requested level.
func (f *armFigures) aligned(rec *podRec, sc *studyCluster) bool {
	if rec.bound.IsZero() {
		return false
	}
	t := sc.topos[rec.node]
	if f.arm == armAlone {
		return onlyAligned(t, rec.spec.affinity)
	}
	if rec.alloc == nil {
		return false
	}
	cpus, _ := flextopo.ParseCPUList(rec.alloc.CPUSet)
	ok := judgeAligned(t, rec.spec.affinity, rec.alloc.GPUIndexes, cpus)
	if ok != (rec.alloc.Level == rec.spec.affinity) {
		f.judgeDisagrees++
	}
	return ok
}

// figures computes the arm's results from the recorder.
func (r *studyRecorder) figures(arm string, sc *studyCluster, start time.Time, wall time.Duration, compression float64,
	deadline time.Duration, gpuCap float64) *armFigures {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := &armFigures{arm: arm, label: armLabels[arm], wall: wall, compression: compression, gpuCap: gpuCap,
		samples: append([]allocSample(nil), r.samples...), violations: append([]string(nil), r.violations...),
		unresolved: len(r.unresolved)}
	var waits []float64
	alignedAt := map[string]bool{}
	for name, rec := range r.pods {
		if rec.spec == nil || rec.created.IsZero() {
			continue
		}
		if !rec.spec.online {
			f.batchCreated++
			if !rec.running.IsZero() {
				f.batchRan++
			}
			if !rec.succeeded.IsZero() {
				f.batchDone++
			}
			continue
		}
		f.online++
		hour := min(23, int(rec.spec.at/3600))
		f.alignedByHour[hour][1]++
		if !rec.bound.IsZero() {
			f.onlinePlaced++
			if f.arm != armAlone && rec.alloc == nil {
				f.boundNoAlloc++
			}
		}
		if rec.running.IsZero() {
			f.neverRan++
		} else {
			waits = append(waits, rec.running.Sub(rec.created).Seconds())
		}
		if f.aligned(rec, sc) {
			alignedAt[name] = true
			f.alignedEver++
			if !rec.running.IsZero() && rec.running.Sub(rec.created) <= deadline {
				f.alignedOT++
				f.alignedByHour[hour][0]++
			}
		}
	}
	f.p50, f.p99 = harness.Percentile(waits, 50), harness.Percentile(waits, 99)

	// Preemptions: victims grouped by preemptor.
	byPreemptor := map[string][]*podRec{}
	for victim, uid := range r.preempted {
		v := r.pods[victim]
		pname := r.byUID[uid]
		p := r.pods[pname]
		if v == nil || p == nil || p.spec == nil || v.spec == nil {
			f.unresolved++
			continue
		}
		f.evictions++
		if !(prioOf(v.spec) < prioOf(p.spec)) {
			f.victimNotLower = append(f.victimNotLower, fmt.Sprintf("%s (priority %d) preempted by %s (priority %d)",
				victim, prioOf(v.spec), pname, prioOf(p.spec)))
		}
		byPreemptor[pname] = append(byPreemptor[pname], v)
		if !v.evicted.IsZero() && !v.gone.IsZero() {
			f.victimGrace = append(f.victimGrace, v.gone.Sub(v.evicted).Seconds())
		}
		if !v.running.IsZero() && !v.evicted.IsZero() {
			f.lostGPUh += v.spec.gpuEq() * v.evicted.Sub(v.running).Seconds() * compression / 3600
		}
	}
	f.preemptors = len(byPreemptor)
	for pname, victims := range byPreemptor {
		p := r.pods[pname]
		ok := false
		for _, v := range victims {
			at := v.evicted
			if at.IsZero() {
				at = v.gone
			}
			placed := alignedAt[pname] && !p.running.IsZero() && (at.IsZero() || p.running.Sub(at) <= deadline)
			switch {
			case !placed:
				f.wasted++
			case p.node != v.node:
				f.elsewhere++
			default:
				ok = true
			}
		}
		if ok {
			f.succeeded++
		}
		if len(f.preemptDetail) < 40 {
			var vs []string
			for _, v := range victims {
				vs = append(vs, fmt.Sprintf("%s@%s(%dgpu, evicted +%.1fs)", v.spec.name, v.node, v.spec.gpus, v.evicted.Sub(start).Seconds()))
			}
			f.preemptDetail = append(f.preemptDetail, fmt.Sprintf("%s %dgpu %s/%s created +%.1fs node %q running +%.1fs aligned %v ok %v alloc %v victims %s",
				pname, p.spec.gpus, p.spec.affinity, p.spec.mode, p.created.Sub(start).Seconds(), p.node, p.running.Sub(start).Seconds(),
				alignedAt[pname], ok, p.alloc != nil, strings.Join(vs, " ")))
		}
	}
	return f
}

func prioOf(p *studyPod) int {
	if p.online {
		return int(studyPriorities[pcStudyOnline])
	}
	return int(studyPriorities[pcStudyBatch])
}

var armLabels = map[string]string{
	armFlextopo:  "(a) kube-scheduler + flextopo, preempt verb",
	armNoPreempt: "(b) kube-scheduler + flextopo, kube-scheduler's victims",
	armAlone:     "(c) kube-scheduler alone",
}

func pct(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

func ratio(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

// studyTable is the Markdown table of the arms.
func studyTable(figs []*armFigures, deadline time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| arm | online pods | placed at requested level (ever) | within %s (scheduled performance) | creation to Running p50 / p99 (s) | never Running | preemptors | successful | evictions | evictions per successful preemption | wasted evictions | victims whose preemptor ran aligned elsewhere | batch work lost (GPU-h, simulated) | batch jobs run / finished |\n", deadline)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range figs {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %.1f / %.1f | %d | %d | %d | %d | %s | %d (%s) | %d | %.0f | %d / %d |\n",
			f.label, f.online, pct(f.alignedEver, f.online), pct(f.alignedOT, f.online), f.p50, f.p99, f.neverRan,
			f.preemptors, f.succeeded, f.evictions, ratio(f.evictions, f.succeeded), f.wasted, pct(f.wasted, f.evictions),
			f.elsewhere, f.lostGPUh, f.batchRan, f.batchDone)
	}
	return b.String()
}

// svgSeries is one line of a chart.
type svgSeries struct {
	name, color string
	xs, ys      []float64
}

var armColors = map[string]string{armFlextopo: "#1b7837", armNoPreempt: "#e08214", armAlone: "#5e3c99"}

// writeSVGChart draws a line chart with x in [0, xmax] and y in [0, 100].
func writeSVGChart(path, title, xlabel, ylabel string, xmax float64, series []svgSeries) error {
	// The legend sits under the x axis, where no line can hide it.
	const w, h, left, right, top, bottom = 720.0, 420.0, 60.0, 20.0, 40.0, 110.0
	pw, ph := w-left-right, h-top-bottom
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14" text-anchor="middle">%s</text>`+"\n", w/2, svgEscape(title))
	for i := 0; i <= 5; i++ {
		y := top + ph - ph*float64(i)/5
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+pw, y)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%d</text>`+"\n", left-6, y+4, i*20)
	}
	for i := 0; i <= 6; i++ {
		x := left + pw*float64(i)/6
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/>`+"\n", x, top, x, top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0f</text>`+"\n", x, top+ph+16, xmax*float64(i)/6)
	}
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", left+pw/2, top+ph+34, svgEscape(xlabel))
	fmt.Fprintf(&b, `<text x="16" y="%.0f" text-anchor="middle" transform="rotate(-90 16 %.0f)">%s</text>`+"\n", top+ph/2, top+ph/2, svgEscape(ylabel))
	for i, s := range series {
		var pts []string
		for j := range s.xs {
			if math.IsNaN(s.ys[j]) {
				continue
			}
			x := left + pw*math.Min(s.xs[j], xmax)/xmax
			y := top + ph - ph*math.Max(0, math.Min(100, s.ys[j]))/100
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
		ly := top + ph + 58 + float64(i)*16
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"/>`+"\n", left+10, ly-4, left+30, ly-4, s.color)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", left+36, ly, svgEscape(s.name))
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func svgEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// allocSeries is GPU allocation (% of the cluster's GPU equivalents) over
// simulated hours.
func allocSeries(f *armFigures) svgSeries {
	s := svgSeries{name: f.label, color: armColors[f.arm]}
	for _, x := range f.samples {
		s.xs = append(s.xs, x.wall*f.compression/3600)
		s.ys = append(s.ys, 100*x.total/f.gpuCap)
	}
	return s
}

// alignedSeries is the share of online pods created in each simulated hour
// that ran at their requested level within the deadline.
func alignedSeries(f *armFigures) svgSeries {
	s := svgSeries{name: f.label, color: armColors[f.arm]}
	for h, v := range f.alignedByHour {
		s.xs = append(s.xs, float64(h)+0.5)
		if v[1] == 0 {
			s.ys = append(s.ys, math.NaN())
			continue
		}
		s.ys = append(s.ys, 100*float64(v[0])/float64(v[1]))
	}
	return s
}
