package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Annotation keys of the flextopo contract.
const (
	annTopology     = "flextopo.io/topology"
	annAffinity     = "flextopo.io/affinity"
	annAffinityMode = "flextopo.io/affinity-mode"
	annAllocation   = "flextopo.io/allocation"

	resGPU = "nvidia.com/gpu"
)

// Topology is the node annotation flextopo.io/topology.
type Topology struct {
	Version int      `json:"version"`
	Sockets []Socket `json:"sockets"`
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
	Version    int               `json:"version"`
	Node       string            `json:"node"`
	Level      string            `json:"level"`
	Mode       string            `json:"mode"`
	GPUs       []string          `json:"gpus"`
	GPUIndexes []int             `json:"gpuIndexes"`
	MIG        []json.RawMessage `json:"mig"`
	CPUSet     string            `json:"cpuset"`
	NUMANodes  []int             `json:"numaNodes"`
	MemoryMiB  int64             `json:"memoryMiB"`
}

const testGPUModel = "NVIDIA GeForce RTX 4090"

// topoBuilder builds a single-node topology. GPU indexes are handed out in
// the order GPUs are added; UUIDs are "GPU-<node>-<index>".
type topoBuilder struct {
	node  string
	topo  Topology
	next  int
	links map[int]map[int]int
}

func newTopo(node string) *topoBuilder {
	return &topoBuilder{node: node, topo: Topology{Version: 1, Sockets: []Socket{}}, links: map[int]map[int]int{}}
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
		gpus[i] = GPU{Index: b.next, UUID: gpuUUID(b.node, b.next), Model: testGPUModel, MemoryMiB: 24564, NVLinks: []NVLink{}}
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

// gpuCount, cpuCount and memoryMiB give the node capacity matching t.
func (t *Topology) gpuCount() int {
	n := 0
	forEachGPU(t, func(int, *GPU) { n++ })
	return n
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
