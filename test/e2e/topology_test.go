package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Annotation keys of the flextopo contract.
const (
	annTopology     = "flextopo.io/topology"
	annAffinity     = "flextopo.io/affinity"
	annAffinityMode = "flextopo.io/affinity-mode"
	annAllocation   = "flextopo.io/allocation"
	annPolicy       = "flextopo.io/allocation-policy"
	annRequires     = "flextopo.io/requires"
	annFraction     = "flextopo.io/gpu-fraction"

	resGPU = "nvidia.com/gpu"
)

// Topology is the node annotation flextopo.io/topology.
type Topology struct {
	Version        int      `json:"version"`
	MIGStrategy    string   `json:"migStrategy,omitempty"`
	SharedResource string   `json:"sharedResource,omitempty"`
	Sockets        []Socket `json:"sockets"`
}

type Socket struct {
	ID        int        `json:"id"`
	NUMANodes []NUMANode `json:"numaNodes"`
}

type NUMANode struct {
	ID           int          `json:"id"`
	CPUs         string       `json:"cpus"`
	MemoryMiB    int64        `json:"memoryMiB"`
	PCIeSwitches []PCIeSwitch `json:"pcieSwitches"`
	GPUs         []GPU        `json:"gpus"`
}

type PCIeSwitch struct {
	ID   int   `json:"id"`
	GPUs []GPU `json:"gpus"`
}

type GPU struct {
	Index     int      `json:"index"`
	UUID      string   `json:"uuid"`
	Model     string   `json:"model"`
	MemoryMiB int64    `json:"memoryMiB"`
	Replicas  int      `json:"replicas,omitempty"`
	NVLinks   []NVLink `json:"nvlinks"`
	MIG       *MIG     `json:"mig,omitempty"`
}

type NVLink struct {
	Peer  int `json:"peer"`
	Links int `json:"links"`
}

type MIG struct {
	Enabled   bool          `json:"enabled"`
	Instances []MIGInstance `json:"instances"`
}

type MIGInstance struct {
	Profile string `json:"profile"`
	Start   int    `json:"start"`
	Size    int    `json:"size"`
	UUID    string `json:"uuid"`
}

// Allocation is the pod annotation flextopo.io/allocation written at bind.
type Allocation struct {
	Version    int                 `json:"version"`
	Node       string              `json:"node"`
	Level      string              `json:"level"`
	Mode       string              `json:"mode"`
	GPUs       []string            `json:"gpus"`
	GPUIndexes []int               `json:"gpuIndexes"`
	MIG        []MIGAllocation     `json:"mig"`
	Replicas   []ReplicaAllocation `json:"replicas,omitempty"`
	CPUSet     string              `json:"cpuset"`
	NUMANodes  []int               `json:"numaNodes"`
	MemoryMiB  int64               `json:"memoryMiB"`
}

// MIGAllocation is one MIG instance of an allocation.
type MIGAllocation struct {
	UUID    string `json:"uuid"`
	Profile string `json:"profile"`
	GPU     string `json:"gpu"` // UUID of the physical GPU
	Start   int    `json:"start"`
	Size    int    `json:"size"`
}

// ReplicaAllocation is the replicas an allocation holds on one shared GPU.
type ReplicaAllocation struct {
	GPU   string `json:"gpu"`
	Count int    `json:"count"`
}

// GPU products the scenarios use, with nvidia-smi's name and memory.
const (
	testGPUModel  = "NVIDIA GeForce RTX 4090"
	testGPUMemMiB = 24564
	h100Model     = "NVIDIA H100 80GB HBM3"
	h100MemMiB    = 81559
	a100Model     = "NVIDIA A100-SXM4-80GB"
	a100MemMiB    = 81920
)

// topoBuilder builds a single-node topology. GPU indexes are handed out in
// the order GPUs are added; UUIDs are "GPU-<node>-<index>".
type topoBuilder struct {
	node   string
	topo   Topology
	next   int
	links  map[int]map[int]int
	model  string // of the GPUs added next
	memMiB int64
}

func newTopo(node string) *topoBuilder {
	return &topoBuilder{node: node, topo: Topology{Version: 1, Sockets: []Socket{}}, links: map[int]map[int]int{},
		model: testGPUModel, memMiB: testGPUMemMiB}
}

// gpuModel sets the product of the GPUs added from now on.
func (b *topoBuilder) gpuModel(model string, memMiB int64) *topoBuilder {
	b.model, b.memMiB = model, memMiB
	return b
}

func gpuUUID(node string, index int) string { return fmt.Sprintf("GPU-%s-%d", node, index) }

// socket adds a socket and returns its position.
func (b *topoBuilder) socket() int {
	b.topo.Sockets = append(b.topo.Sockets, Socket{ID: len(b.topo.Sockets), NUMANodes: []NUMANode{}})
	return len(b.topo.Sockets) - 1
}

// numaRef names a NUMA node of the builder by position (pointers into the
// slices would not survive appends).
type numaRef struct{ socket, pos int }

func (b *topoBuilder) get(r numaRef) *NUMANode { return &b.topo.Sockets[r.socket].NUMANodes[r.pos] }

// numa adds a NUMA node (ids are global across sockets) to socket s.
func (b *topoBuilder) numa(s int, cpus string, memMiB int64) numaRef {
	id := 0
	for _, so := range b.topo.Sockets {
		id += len(so.NUMANodes)
	}
	sock := &b.topo.Sockets[s]
	sock.NUMANodes = append(sock.NUMANodes, NUMANode{
		ID: id, CPUs: cpus, MemoryMiB: memMiB, PCIeSwitches: []PCIeSwitch{}, GPUs: []GPU{},
	})
	return numaRef{socket: s, pos: len(sock.NUMANodes) - 1}
}

func (b *topoBuilder) newGPUs(n int) []GPU {
	gpus := make([]GPU, n)
	for i := range gpus {
		gpus[i] = GPU{Index: b.next, UUID: gpuUUID(b.node, b.next), Model: b.model, MemoryMiB: b.memMiB, NVLinks: []NVLink{}}
		b.next++
	}
	return gpus
}

// switchGPUs adds a PCIe switch with n GPUs to the NUMA node and returns their indexes.
func (b *topoBuilder) switchGPUs(r numaRef, count int) []int {
	gpus := b.newGPUs(count)
	n := b.get(r)
	n.PCIeSwitches = append(n.PCIeSwitches, PCIeSwitch{ID: b.switchCount(), GPUs: gpus})
	return indexes(gpus)
}

// directGPUs adds n GPUs straight under the NUMA node.
func (b *topoBuilder) directGPUs(r numaRef, count int) []int {
	gpus := b.newGPUs(count)
	n := b.get(r)
	n.GPUs = append(n.GPUs, gpus...)
	return indexes(gpus)
}

// migGPU adds a MIG-enabled GPU of the given model (80 GB H100 memory)
// straight under the NUMA node; each instance gets uuid
// MIG-<node>-<gpu index>-<start>.
func (b *topoBuilder) migGPU(r numaRef, model string, instances ...MIGInstance) int {
	g := b.newGPUs(1)[0]
	g.Model = model
	g.MemoryMiB = h100MemMiB
	for i := range instances {
		instances[i].UUID = migUUID(b.node, g.Index, instances[i].Start)
	}
	g.MIG = &MIG{Enabled: true, Instances: instances}
	n := b.get(r)
	n.GPUs = append(n.GPUs, g)
	return g.Index
}

// migInstances lists instances of one profile at the given start slots.
func migInstances(profile string, size int, starts ...int) []MIGInstance {
	out := make([]MIGInstance, len(starts))
	for i, st := range starts {
		out[i] = MIGInstance{Profile: profile, Start: st, Size: size}
	}
	return out
}

func migUUID(node string, gpu, start int) string {
	return fmt.Sprintf("MIG-%s-%d-%d", node, gpu, start)
}

// share time-slices every GPU added so far into `replicas` replicas, which
// the device plugin advertises as `resource` ("" keeps nvidia.com/gpu).
func (b *topoBuilder) share(replicas int, resource string) {
	b.topo.SharedResource = resource
	forEachGPU(&b.topo, func(_ int, g *GPU) { g.Replicas = replicas })
}

func (b *topoBuilder) switchCount() int {
	c := 0
	for _, s := range b.topo.Sockets {
		for _, n := range s.NUMANodes {
			c += len(n.PCIeSwitches)
		}
	}
	return c
}

// nvlink links GPUs a and b (both directions).
func (b *topoBuilder) nvlink(x, y, links int) {
	for _, p := range [][2]int{{x, y}, {y, x}} {
		if b.links[p[0]] == nil {
			b.links[p[0]] = map[int]int{}
		}
		b.links[p[0]][p[1]] = links
	}
}

func indexes(gpus []GPU) []int {
	out := make([]int, len(gpus))
	for i, g := range gpus {
		out[i] = g.Index
	}
	return out
}

// forEachGPU visits every GPU of t with its NUMA node id.
func forEachGPU(t *Topology, f func(numa int, g *GPU)) {
	for si := range t.Sockets {
		for ni := range t.Sockets[si].NUMANodes {
			n := &t.Sockets[si].NUMANodes[ni]
			for pi := range n.PCIeSwitches {
				for gi := range n.PCIeSwitches[pi].GPUs {
					f(n.ID, &n.PCIeSwitches[pi].GPUs[gi])
				}
			}
			for gi := range n.GPUs {
				f(n.ID, &n.GPUs[gi])
			}
		}
	}
}

// build applies the NVLink table and returns the topology.
func (b *topoBuilder) build() *Topology {
	forEachGPU(&b.topo, func(_ int, g *GPU) {
		peers := make([]int, 0, len(b.links[g.Index]))
		for p := range b.links[g.Index] {
			peers = append(peers, p)
		}
		sort.Ints(peers)
		g.NVLinks = []NVLink{}
		for _, p := range peers {
			g.NVLinks = append(g.NVLinks, NVLink{Peer: p, Links: b.links[g.Index][p]})
		}
	})
	t := b.topo
	return &t
}

func (t *Topology) json() string {
	out, err := json.Marshal(t)
	if err != nil {
		panic(err)
	}
	return string(out)
}

// deviceCapacity, cpuCount and memoryMiB give the node capacity matching t.
//
// deviceCapacity is what the NVIDIA device plugin advertises: whole GPUs as
// nvidia.com/gpu; MIG instances as nvidia.com/mig-<profile> (MIG strategy
// mixed) or as nvidia.com/gpu (single); the replicas of shared GPUs under the
// topology's sharedResource, else nvidia.com/gpu.
func (t *Topology) deviceCapacity() corev1.ResourceList {
	counts := map[corev1.ResourceName]int64{}
	single := t.migSingle()
	forEachGPU(t, func(_ int, g *GPU) {
		switch {
		case g.MIG != nil && g.MIG.Enabled:
			for _, m := range g.MIG.Instances {
				name := corev1.ResourceName("nvidia.com/mig-" + m.Profile)
				if single {
					name = resGPU
				}
				counts[name]++
			}
		case g.Replicas > 0 && t.SharedResource != "":
			counts[corev1.ResourceName(t.SharedResource)] += int64(g.Replicas)
		case g.Replicas > 0:
			counts[resGPU] += int64(g.Replicas)
		default:
			counts[resGPU]++
		}
	})
	out := corev1.ResourceList{}
	for name, n := range counts {
		out[name] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

// nodeCapacity is the whole capacity of a node with topology t: its devices,
// CPUs, memory and kubelet's default of 110 pods.
func (t *Topology) nodeCapacity() corev1.ResourceList {
	capacity := t.deviceCapacity()
	capacity[corev1.ResourceCPU] = *resource.NewQuantity(int64(t.cpuCount()), resource.DecimalSI)
	capacity[corev1.ResourceMemory] = *resource.NewQuantity(t.memoryMiB()<<20, resource.BinarySI)
	capacity[corev1.ResourcePods] = *resource.NewQuantity(110, resource.DecimalSI)
	return capacity
}

// migSingle says whether the node runs MIG strategy single, by the rule of
// README.md ("migStrategy"): the explicit key, else every GPU MIG-enabled
// with instances of one profile.
func (t *Topology) migSingle() bool {
	if t.MIGStrategy != "" {
		return t.MIGStrategy == "single"
	}
	profiles := map[string]bool{}
	gpus, migGPUs := 0, 0
	forEachGPU(t, func(_ int, g *GPU) {
		gpus++
		if g.MIG != nil && g.MIG.Enabled {
			migGPUs++
			for _, m := range g.MIG.Instances {
				profiles[m.Profile] = true
			}
		}
	})
	return gpus > 0 && migGPUs == gpus && len(profiles) == 1
}

func (t *Topology) cpuCount() int {
	n := 0
	for _, s := range t.Sockets {
		for _, nn := range s.NUMANodes {
			cpus, err := parseCPUList(nn.CPUs)
			if err != nil {
				panic(err)
			}
			n += len(cpus)
		}
	}
	return n
}

func (t *Topology) memoryMiB() int64 {
	var m int64
	for _, s := range t.Sockets {
		for _, nn := range s.NUMANodes {
			m += nn.MemoryMiB
		}
	}
	return m
}

// numaOf returns the NUMA node of a GPU UUID, or -1.
func (t *Topology) numaOf(uuid string) int {
	found := -1
	forEachGPU(t, func(numa int, g *GPU) {
		if g.UUID == uuid {
			found = numa
		}
	})
	return found
}

// numaCPUs returns the CPUs of NUMA node id.
func (t *Topology) numaCPUs(id int) map[int]bool {
	for _, s := range t.Sockets {
		for _, n := range s.NUMANodes {
			if n.ID == id {
				cpus, err := parseCPUList(n.CPUs)
				if err != nil {
					panic(err)
				}
				return cpus
			}
		}
	}
	return nil
}

// parseCPUList parses a Linux cpulist ("0-3,8,10-11").
func parseCPUList(s string) (map[int]bool, error) {
	out := map[int]bool{}
	s = strings.TrimSpace(s)
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpulist %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpulist %q: %w", s, err)
			}
		}
		if b < a {
			return nil, fmt.Errorf("cpulist %q: descending range %q", s, part)
		}
		for i := a; i <= b; i++ {
			if out[i] {
				return nil, fmt.Errorf("cpulist %q: cpu %d listed twice", s, i)
			}
			out[i] = true
		}
	}
	return out, nil
}
