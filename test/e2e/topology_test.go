package e2e

import (
	"sort"

	"flextopo.dev/e2e/internal/flextopo"
)

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
	topo   flextopo.Topology
	next   int
	links  map[int]map[int]int
	model  string // of the GPUs added next
	memMiB int64
}

func newTopo(node string) *topoBuilder {
	return &topoBuilder{node: node, topo: flextopo.Topology{Version: 1, Sockets: []flextopo.Socket{}}, links: map[int]map[int]int{},
		model: testGPUModel, memMiB: testGPUMemMiB}
}

// gpuModel sets the product of the GPUs added from now on.
func (b *topoBuilder) gpuModel(model string, memMiB int64) *topoBuilder {
	b.model, b.memMiB = model, memMiB
	return b
}

// socket adds a socket and returns its position.
func (b *topoBuilder) socket() int {
	b.topo.Sockets = append(b.topo.Sockets, flextopo.Socket{ID: len(b.topo.Sockets), NUMANodes: []flextopo.NUMANode{}})
	return len(b.topo.Sockets) - 1
}

// numaRef names a NUMA node of the builder by position (pointers into the
// slices would not survive appends).
type numaRef struct{ socket, pos int }

func (b *topoBuilder) get(r numaRef) *flextopo.NUMANode {
	return &b.topo.Sockets[r.socket].NUMANodes[r.pos]
}

// numa adds a NUMA node (ids are global across sockets) to socket s.
func (b *topoBuilder) numa(s int, cpus string, memMiB int64) numaRef {
	id := 0
	for _, so := range b.topo.Sockets {
		id += len(so.NUMANodes)
	}
	sock := &b.topo.Sockets[s]
	sock.NUMANodes = append(sock.NUMANodes, flextopo.NUMANode{
		ID: id, CPUs: cpus, MemoryMiB: memMiB, PCIeSwitches: []flextopo.PCIeSwitch{}, GPUs: []flextopo.GPU{},
	})
	return numaRef{socket: s, pos: len(sock.NUMANodes) - 1}
}

func (b *topoBuilder) newGPUs(n int) []flextopo.GPU {
	gpus := make([]flextopo.GPU, n)
	for i := range gpus {
		gpus[i] = flextopo.GPU{Index: b.next, UUID: flextopo.GPUUUID(b.node, b.next), Model: b.model, MemoryMiB: b.memMiB, NVLinks: []flextopo.NVLink{}}
		b.next++
	}
	return gpus
}

// switchGPUs adds a PCIe switch with n GPUs to the NUMA node and returns their indexes.
func (b *topoBuilder) switchGPUs(r numaRef, count int) []int {
	gpus := b.newGPUs(count)
	n := b.get(r)
	n.PCIeSwitches = append(n.PCIeSwitches, flextopo.PCIeSwitch{ID: b.switchCount(), GPUs: gpus})
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
func (b *topoBuilder) migGPU(r numaRef, model string, instances ...flextopo.MIGInstance) int {
	g := b.newGPUs(1)[0]
	g.Model = model
	g.MemoryMiB = h100MemMiB
	for i := range instances {
		instances[i].UUID = flextopo.MIGUUID(b.node, g.Index, instances[i].Start)
	}
	g.MIG = &flextopo.MIG{Enabled: true, Instances: instances}
	n := b.get(r)
	n.GPUs = append(n.GPUs, g)
	return g.Index
}

// migInstances lists instances of one profile at the given start slots.
func migInstances(profile string, size int, starts ...int) []flextopo.MIGInstance {
	out := make([]flextopo.MIGInstance, len(starts))
	for i, st := range starts {
		out[i] = flextopo.MIGInstance{Profile: profile, Start: st, Size: size}
	}
	return out
}

// share time-slices every GPU added so far into `replicas` replicas, which
// the device plugin advertises as `resource` ("" keeps nvidia.com/gpu).
func (b *topoBuilder) share(replicas int, resource string) {
	b.topo.SharedResource = resource
	flextopo.ForEachGPU(&b.topo, func(_ int, g *flextopo.GPU) { g.Replicas = replicas })
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

func indexes(gpus []flextopo.GPU) []int {
	out := make([]int, len(gpus))
	for i, g := range gpus {
		out[i] = g.Index
	}
	return out
}

func (b *topoBuilder) build() *flextopo.Topology {
	flextopo.ForEachGPU(&b.topo, func(_ int, g *flextopo.GPU) {
		peers := make([]int, 0, len(b.links[g.Index]))
		for p := range b.links[g.Index] {
			peers = append(peers, p)
		}
		sort.Ints(peers)
		g.NVLinks = []flextopo.NVLink{}
		for _, p := range peers {
			g.NVLinks = append(g.NVLinks, flextopo.NVLink{Peer: p, Links: b.links[g.Index][p]})
		}
	})
	t := b.topo
	return &t
}
