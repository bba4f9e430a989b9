package study

// The preemption study's cluster and workload (study_test.go).
//
// Nodes: the paper's two servers and an H100 with MIG, from the topology
// annotations of the reference servers in api/examples (rtx4090-8x.json:
// 2 sockets, 8 NUMA nodes of 8 cores, one GPU each, no NVLink; a100-8x.json:
// 2 sockets, 2 NUMA nodes of 64 cores, 8 NVSwitch GPUs; h100-8x-mig.json:
// 2 NUMA nodes of 56 cores, 8 NVSwitch GPUs of which 3 are split into MIG
// instances), with each node's own GPU and MIG UUIDs. The mix is fixed:
// 50% RTX 4090, 40% A100, 10% H100 (node i is an H100 when i%10 == 9, an
// A100 when i%10 >= 5, else an RTX 4090).
//
// Workload, one simulated day replayed in W wall seconds (compression
// C = 86400/W simulated seconds per wall second); every lifetime is divided
// by C. Two classes:
//   - online inference services, PriorityClass study-online (1000): 1, 2,
//     4 or 8 GPUs, pinned CPUs (Guaranteed QoS, integer CPUs), affinity numa
//     or nvlink, mode guaranteed or best-effort. They arrive by a
//     non-homogeneous Poisson process whose rate follows the diurnal target
//     of online GPU load u(t) (Little's law: rate = u(t) x GPUs / (mean GPUs
//     x mean lifetime)); the day starts at the trough with that load already
//     running.
//   - offline batch inference and training jobs, PriorityClass study-batch
//     (100, preemptionPolicy Never): a queue in front of the cluster (as a
//     batch system would) keeps at most Q batch pods pending and submits the
//     next job of a fixed, seeded sequence whenever fewer are pending, so
//     batch fills whatever online leaves free. They run for their lifetime
//     (kwok marks them Succeeded) unless preempted.
//
// Sources: "synthetic" (a seeded generator: u(t) from 15% at the trough to
// 55% at the peak, a cosine; online sizes 1/2/4/8 GPUs at 50/25/15/10%,
// lifetimes exponential, mean 8 h online, 6 h batch inference, 12 h
// training: long enough that the churn of a compressed day stays within what
// one 2-core machine's control plane can serve) and "openb" (the Alibaba trace in ../shared/data/openb, read
// from there, never copied: see openbWorkload).

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"flextopo.dev/e2e/internal/flextopo"
)

const (
	kindRTX4090 = "rtx4090"
	kindA100    = "a100"
	kindH100    = "h100-mig"
)

type studyNode struct {
	name, kind string
	topo       *flextopo.Topology
}

// exampleTopology reads an api/examples topology and renames its GPU and
// MIG UUIDs after node.
func exampleTopology(root, file, node string) (*flextopo.Topology, error) {
	raw, err := os.ReadFile(filepath.Join(root, "api", "examples", file))
	if err != nil {
		return nil, err
	}
	var t flextopo.Topology
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	flextopo.ForEachGPU(&t, func(_ int, g *flextopo.GPU) {
		g.UUID = flextopo.GPUUUID(node, g.Index)
		if g.NVLinks == nil {
			g.NVLinks = []flextopo.NVLink{}
		}
		if g.MIG != nil {
			for i := range g.MIG.Instances {
				g.MIG.Instances[i].UUID = flextopo.MIGUUID(node, g.Index, g.MIG.Instances[i].Start)
			}
		}
	})
	for si := range t.Sockets {
		for ni := range t.Sockets[si].NUMANodes {
			n := &t.Sockets[si].NUMANodes[ni]
			if n.GPUs == nil {
				n.GPUs = []flextopo.GPU{}
			}
			if n.PCIeSwitches == nil {
				n.PCIeSwitches = []flextopo.PCIeSwitch{}
			}
		}
	}
	return &t, nil
}

func studyNodes(root string, count int) ([]studyNode, error) {
	files := map[string]string{kindRTX4090: "rtx4090-8x.json", kindA100: "a100-8x.json", kindH100: "h100-8x-mig.json"}
	out := make([]studyNode, count)
	for i := range out {
		kind := kindRTX4090
		switch {
		case i%10 == 9:
			kind = kindH100
		case i%10 >= 5:
			kind = kindA100
		}
		name := fmt.Sprintf("%s-%04d", kind, i)
		topo, err := exampleTopology(root, files[kind], name)
		if err != nil {
			return nil, err
		}
		out[i] = studyNode{name: name, kind: kind, topo: topo}
	}
	return out, nil
}

// gpuEquivalents is what a node offers in whole GPUs: a MIG instance counts
// its compute slices out of 7.
func gpuEquivalents(t *flextopo.Topology) float64 {
	var sum float64
	flextopo.ForEachGPU(t, func(_ int, g *flextopo.GPU) {
		if g.MIG != nil && g.MIG.Enabled {
			for _, m := range g.MIG.Instances {
				sum += migSlices(m.Profile) / 7
			}
			return
		}
		sum++
	})
	return sum
}

// migSlices is the compute slice count of a MIG profile ("3g.40gb" -> 3).
func migSlices(profile string) float64 {
	n, _ := strconv.Atoi(strings.SplitN(profile, "g.", 2)[0])
	return float64(n)
}

// studyPod is one pod of the workload.
type studyPod struct {
	name     string
	online   bool
	kind     string  // online, batch-inference, training
	at       float64 // online: arrival, simulated seconds from the start
	life     float64 // simulated seconds of running
	gpus     int     // whole GPUs (nvidia.com/gpu)
	mig      string  // a MIG profile instead of GPUs ("" none)
	cpu      int     // online: pinned CPUs; batch: CPU request
	memGi    int
	affinity string // online only
	mode     string // online only
}

func (p studyPod) gpuEq() float64 {
	if p.mig != "" {
		return migSlices(p.mig) / 7
	}
	return float64(p.gpus)
}

type studyWorkload struct {
	source     string
	seed       int64
	simSeconds float64
	online     []studyPod // by arrival
	batch      []studyPod // the queue's sequence
	describe   string     // how it was made, for the report
}

// onlineShape draws an online pod's affinity, mode and pinned CPUs for its
// GPU count: 1 GPU numa; 2 or 4 GPUs numa or nvlink (even odds); 8 GPUs
// nvlink; 70% guaranteed, 30% best-effort; cpuPerGPU pinned CPUs per GPU.
func onlineShape(rng *rand.Rand, p *studyPod, cpuPerGPU int) {
	switch {
	case p.gpus == 1:
		p.affinity = "numa"
	case p.gpus >= 8:
		p.affinity = "nvlink"
	case rng.Intn(2) == 0:
		p.affinity = "numa"
	default:
		p.affinity = "nvlink"
	}
	p.mode = "guaranteed"
	if rng.Float64() < 0.3 {
		p.mode = "best-effort"
	}
	p.cpu = cpuPerGPU * p.gpus
	p.memGi = 16 * p.gpus
}

// arrivals draws online arrival times over [0, sim) for a target load
// u(t) (a share of gpuCap), by thinning a Poisson process; meanGPU and
// meanLife are those of the pods that will be assigned to the arrivals.
func arrivals(rng *rand.Rand, sim, gpuCap, meanGPU, meanLife float64, u func(t float64) float64, uMax float64) []float64 {
	rate := func(t float64) float64 { return u(t) * gpuCap / (meanGPU * meanLife) }
	peak := uMax * gpuCap / (meanGPU * meanLife)
	var out []float64
	for t := 0.0; ; {
		t += rng.ExpFloat64() / peak
		if t >= sim {
			return out
		}
		if rng.Float64()*peak <= rate(t) {
			out = append(out, t)
		}
	}
}

func expLife(rng *rand.Rand, mean, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, rng.ExpFloat64()*mean))
}

// batchCount is how many batch jobs the queue may need: enough to refill the
// whole cluster every mean lifetime, twice over.
func batchCount(gpuCap, meanGPU, meanLife, sim float64) int {
	return int(2*gpuCap/meanGPU*(sim/meanLife+1)) + 100
}

// syntheticWorkload is the seeded generator; gpuCap is the cluster's GPU
// equivalents, mig whether MIG nodes exist.
func syntheticWorkload(seed int64, gpuCap float64, mig bool) *studyWorkload {
	const day = 86400.0
	rng := rand.New(rand.NewSource(seed))
	w := &studyWorkload{source: "synthetic", seed: seed, simSeconds: day}
	u := func(t float64) float64 { return 0.15 + 0.40*(1-math.Cos(2*math.Pi*t/day))/2 }
	const onlineLife = 8 * 3600.0
	sizes := []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 4, 4, 4, 8, 8}
	meanGPU := 0.0
	for _, s := range sizes {
		meanGPU += float64(s)
	}
	meanGPU /= float64(len(sizes))
	newOnline := func(at, life float64) {
		p := studyPod{name: fmt.Sprintf("on-%05d", len(w.online)), online: true, kind: "online", at: at, life: life,
			gpus: sizes[rng.Intn(len(sizes))]}
		onlineShape(rng, &p, 4)
		w.online = append(w.online, p)
	}
	// The trough's load is running when the day starts: residual lifetimes.
	for load := 0.0; load < u(0)*gpuCap; {
		newOnline(0, math.Max(600, rng.Float64()*expLife(rng, onlineLife, 1800, 4*onlineLife)))
		load += float64(w.online[len(w.online)-1].gpus)
	}
	for _, at := range arrivals(rng, day, gpuCap, meanGPU, onlineLife, u, 0.55) {
		newOnline(at, expLife(rng, onlineLife, 1800, 4*onlineLife))
	}
	n := batchCount(gpuCap, 3, 8*3600, day)
	for i := 0; i < n; i++ {
		p := studyPod{name: fmt.Sprintf("ba-%05d", i), kind: "batch-inference"}
		switch r := rng.Float64(); {
		case mig && r < 0.05:
			p.mig = "1g.10gb"
			p.cpu, p.memGi = 2, 8
			p.life = expLife(rng, 6*3600, 3600, 24*3600)
		case r < 0.65:
			p.gpus = 1 + rng.Intn(2)
			p.cpu, p.memGi = 4*p.gpus, 16*p.gpus
			p.life = expLife(rng, 6*3600, 3600, 24*3600)
		default:
			p.kind = "training"
			p.gpus = []int{4, 8}[rng.Intn(2)]
			p.cpu, p.memGi = 4*p.gpus, 32*p.gpus
			p.life = expLife(rng, 12*3600, 2*3600, 36*3600)
		}
		w.batch = append(w.batch, p)
	}
	w.describe = fmt.Sprintf("synthetic, seed %d: %d online pods (%d running at the start), batch queue of %d jobs",
		seed, len(w.online), countAt0(w.online), len(w.batch))
	return w
}

func countAt0(ps []studyPod) int {
	n := 0
	for _, p := range ps {
		if p.at == 0 {
			n++
		}
	}
	return n
}

// openbRecord is one GPU pod of the trace.
type openbRecord struct {
	qos              string
	cpuMilli, gpus   int
	gpuMilli         int
	creation, delete int64
}

func readOpenb(path string) ([]openbRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	head, err := r.Read()
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, k := range []string{"cpu_milli", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time"} {
		if _, ok := col[k]; !ok {
			return nil, fmt.Errorf("%s: no column %q", path, k)
		}
	}
	var out []openbRecord
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		atoi := func(k string) int64 { v, _ := strconv.ParseInt(rec[col[k]], 10, 64); return v }
		o := openbRecord{qos: rec[col["qos"]], cpuMilli: int(atoi("cpu_milli")), gpus: int(atoi("num_gpu")),
			gpuMilli: int(atoi("gpu_milli")), creation: atoi("creation_time"), delete: atoi("deletion_time")}
		if o.gpus == 0 || o.delete <= o.creation {
			continue
		}
		out = append(out, o)
	}
}

// openbWorkload drives the workload by the openb trace (default pod list):
//   - class: LS and Guaranteed pods are online; BE and Burstable pods are
//     batch (BE as batch inference, Burstable as training);
//   - online GPUs: the pod's num_gpu; batch: num_gpu, and a GPU-sharing pod
//     (gpu_milli < 1000) asks one whole GPU (these nodes share no GPUs);
//   - diurnal arrival: the online arrival rate follows the trace's own
//     hour-of-day histogram of LS creations (folded over its 149 days),
//     scaled between 15% and 55% of the cluster's GPUs as online load;
//   - lifetimes: the pod's deletion - creation, times lifeScale (60: the
//     trace's median LS pod lives 14 min and its median BE pod 3.4 min,
//     which compressed C-fold would last under a wall second and churn the
//     control plane beyond one small machine), clipped to [1 h, 24 h]
//     simulated;
//   - pinned CPUs of online pods: cpu_milli rounded, at most 6 per GPU, so a
//     1-GPU NUMA-aligned service fits an RTX 4090's 8-core NUMA node;
//   - affinity and mode are not in the trace: drawn with the seed as in the
//     synthetic generator;
//   - the records are used in a seeded shuffle, repeated as needed.
func openbWorkload(path string, seed int64, gpuCap float64) (*studyWorkload, error) {
	const day, lifeScale = 86400.0, 60.0
	recs, err := readOpenb(path)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(seed))
	var on, ba []openbRecord
	hist := make([]float64, 24)
	for _, r := range recs {
		switch r.qos {
		case "LS", "Guaranteed":
			on = append(on, r)
			hist[(r.creation/3600)%24]++
		default:
			ba = append(ba, r)
		}
	}
	if len(on) == 0 || len(ba) == 0 {
		return nil, fmt.Errorf("%s: no online or no batch GPU pods", path)
	}
	rng.Shuffle(len(on), func(i, j int) { on[i], on[j] = on[j], on[i] })
	rng.Shuffle(len(ba), func(i, j int) { ba[i], ba[j] = ba[j], ba[i] })
	lo, hi := hist[0], hist[0]
	for _, h := range hist {
		lo, hi = math.Min(lo, h), math.Max(hi, h)
	}
	// Linear between the hour midpoints; the trough hour of the trace is
	// the start of the simulated day.
	trough := 0
	for i, h := range hist {
		if h == lo {
			trough = i
			break
		}
	}
	u := func(t float64) float64 {
		x := t/3600 + float64(trough)
		i := int(math.Floor(x))
		f := x - float64(i)
		h := hist[i%24]*(1-f) + hist[(i+1)%24]*f
		return 0.15 + 0.40*(h-lo)/(hi-lo)
	}
	life := func(r openbRecord) float64 {
		return math.Max(3600, math.Min(day, float64(r.delete-r.creation)*lifeScale))
	}
	// The mean GPU count and lifetime of some trace records.
	means := func(recs []openbRecord) (gpus, lifetime float64) {
		for _, r := range recs {
			gpus += float64(r.gpus)
			lifetime += life(r)
		}
		return gpus / float64(len(recs)), lifetime / float64(len(recs))
	}
	meanGPU, meanLife := means(on)
	w := &studyWorkload{source: "openb", seed: seed, simSeconds: day}
	next := 0
	newOnline := func(at float64, residual bool) float64 {
		r := on[next%len(on)]
		next++
		p := studyPod{name: fmt.Sprintf("on-%05d", len(w.online)), online: true, kind: "online", at: at,
			life: life(r), gpus: r.gpus}
		if residual {
			p.life = math.Max(600, rng.Float64()*p.life)
		}
		onlineShape(rng, &p, 0)
		p.cpu = max(1, min((r.cpuMilli+500)/1000, 6*p.gpus))
		w.online = append(w.online, p)
		return float64(p.gpus)
	}
	for load := 0.0; load < u(0)*gpuCap; {
		load += newOnline(0, true)
	}
	for _, at := range arrivals(rng, day, gpuCap, meanGPU, meanLife, u, 0.55) {
		newOnline(at, false)
	}
	bGPU, bLife := means(ba)
	n := batchCount(gpuCap, bGPU, bLife, day)
	for i := 0; i < n; i++ {
		r := ba[i%len(ba)]
		p := studyPod{name: fmt.Sprintf("ba-%05d", i), kind: "batch-inference", gpus: r.gpus, life: life(r),
			cpu: max(1, (r.cpuMilli+500)/1000), memGi: 8 * r.gpus}
		if r.qos == "Burstable" {
			p.kind = "training"
		}
		w.batch = append(w.batch, p)
	}
	sort.SliceStable(w.online, func(i, j int) bool { return w.online[i].at < w.online[j].at })
	w.describe = fmt.Sprintf("openb (%s), seed %d: %d online pods (%d running at the start) from %d LS/Guaranteed records, batch queue of %d jobs from %d BE/Burstable records; online arrival by the trace's hour-of-day profile (trough at %02d:00)",
		filepath.Base(path), seed, len(w.online), countAt0(w.online), len(on), len(w.batch), len(ba), trough)
	return w, nil
}
