// Package flextopo is flextopo's annotation contract as the end-to-end
// tests and the preemption study write and read it: the annotation keys,
// the node topology and the pod allocation as JSON, and what a node with a
// topology advertises to Kubernetes.
package flextopo

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"flextopo.dev/node/alloc"
)

// Annotation keys of the flextopo contract.
const (
	AnnTopology     = "flextopo.io/topology"
	AnnAffinity     = "flextopo.io/affinity"
	AnnAffinityMode = "flextopo.io/affinity-mode"
	AnnAllocation   = "flextopo.io/allocation"
	AnnPolicy       = "flextopo.io/allocation-policy"
	AnnRequires     = "flextopo.io/requires"
	AnnFraction     = "flextopo.io/gpu-fraction"

	ResGPU = "nvidia.com/gpu"
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

// Allocation is the pod annotation flextopo.io/allocation written at bind,
// as the node agent reads it (flextopo.dev/node/alloc): one Go type for the
// annotation in the agent and the e2e. ParseAllocation validates it against
// api/allocation.schema.json's rules.
type Allocation = alloc.Allocation

// MIGAllocation is one MIG instance of an allocation.
type MIGAllocation = alloc.MIG

// ReplicaAllocation is the replicas an allocation holds on one shared GPU.
type ReplicaAllocation = alloc.Replica

// ParseAllocation decodes and validates an allocation annotation.
func ParseAllocation(text string) (*Allocation, error) { return alloc.ParseAllocation(text) }

// GPUUUID is the UUID of GPU index of node in the tests' topologies:
// "GPU-<node>-<index>".
func GPUUUID(node string, index int) string { return fmt.Sprintf("GPU-%s-%d", node, index) }

// MIGUUID is the UUID of the MIG instance of GPU gpu of node that starts at
// slot start: "MIG-<node>-<gpu>-<start>".
func MIGUUID(node string, gpu, start int) string {
	return fmt.Sprintf("MIG-%s-%d-%d", node, gpu, start)
}

// ForEachGPU visits every GPU of t with its NUMA node id.
func ForEachGPU(t *Topology, f func(numa int, g *GPU)) {
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

// JSON is t as the annotation carries it.
func (t *Topology) JSON() string {
	out, err := json.Marshal(t)
	if err != nil {
		panic(err)
	}
	return string(out)
}

// DeviceCapacity, CPUCount and MemoryMiB give the node capacity matching t.
//
// DeviceCapacity is what the NVIDIA device plugin advertises: whole GPUs as
// nvidia.com/gpu; MIG instances as nvidia.com/mig-<profile> (MIG strategy
// mixed) or as nvidia.com/gpu (single); the replicas of shared GPUs under the
// topology's sharedResource, else nvidia.com/gpu.
func (t *Topology) DeviceCapacity() corev1.ResourceList {
	counts := map[corev1.ResourceName]int64{}
	single := t.migSingle()
	ForEachGPU(t, func(_ int, g *GPU) {
		switch {
		case g.MIG != nil && g.MIG.Enabled:
			for _, m := range g.MIG.Instances {
				name := corev1.ResourceName("nvidia.com/mig-" + m.Profile)
				if single {
					name = ResGPU
				}
				counts[name]++
			}
		case g.Replicas > 0 && t.SharedResource != "":
			counts[corev1.ResourceName(t.SharedResource)] += int64(g.Replicas)
		case g.Replicas > 0:
			counts[ResGPU] += int64(g.Replicas)
		default:
			counts[ResGPU]++
		}
	})
	out := corev1.ResourceList{}
	for name, n := range counts {
		out[name] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

// NodeCapacity is the whole capacity of a node with topology t: its devices,
// CPUs, memory and kubelet's default of 110 pods.
func (t *Topology) NodeCapacity() corev1.ResourceList {
	capacity := t.DeviceCapacity()
	capacity[corev1.ResourceCPU] = *resource.NewQuantity(int64(t.CPUCount()), resource.DecimalSI)
	capacity[corev1.ResourceMemory] = *resource.NewQuantity(t.MemoryMiB()<<20, resource.BinarySI)
	capacity[corev1.ResourcePods] = *resource.NewQuantity(110, resource.DecimalSI)
	return capacity
}

// migSingle says whether the node runs MIG strategy single, by the rule of
// docs/annotations.md ("migStrategy"): the explicit key, else every GPU MIG-enabled
// with instances of one profile.
func (t *Topology) migSingle() bool {
	if t.MIGStrategy != "" {
		return t.MIGStrategy == "single"
	}
	profiles := map[string]bool{}
	gpus, migGPUs := 0, 0
	ForEachGPU(t, func(_ int, g *GPU) {
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

func (t *Topology) CPUCount() int {
	n := 0
	for _, s := range t.Sockets {
		for _, nn := range s.NUMANodes {
			cpus, err := ParseCPUList(nn.CPUs)
			if err != nil {
				panic(err)
			}
			n += len(cpus)
		}
	}
	return n
}

func (t *Topology) MemoryMiB() int64 {
	var m int64
	for _, s := range t.Sockets {
		for _, nn := range s.NUMANodes {
			m += nn.MemoryMiB
		}
	}
	return m
}

// NUMAOf returns the NUMA node of a GPU UUID, or -1.
func (t *Topology) NUMAOf(uuid string) int {
	found := -1
	ForEachGPU(t, func(numa int, g *GPU) {
		if g.UUID == uuid {
			found = numa
		}
	})
	return found
}

// NUMACPUs returns the CPUs of NUMA node id.
func (t *Topology) NUMACPUs(id int) map[int]bool {
	for _, s := range t.Sockets {
		for _, n := range s.NUMANodes {
			if n.ID == id {
				cpus, err := ParseCPUList(n.CPUs)
				if err != nil {
					panic(err)
				}
				return cpus
			}
		}
	}
	return nil
}

// MIGInstanceOf finds MIG instance uuid in t, with the UUID of its GPU.
func (t *Topology) MIGInstanceOf(uuid string) (gpuUUID string, inst MIGInstance, ok bool) {
	ForEachGPU(t, func(_ int, g *GPU) {
		if g.MIG == nil {
			return
		}
		for _, m := range g.MIG.Instances {
			if m.UUID == uuid {
				gpuUUID, inst, ok = g.UUID, m, true
			}
		}
	})
	return
}

// GPUIndexOf maps a GPU UUID to its index (-1 when unknown).
func (t *Topology) GPUIndexOf(uuid string) int {
	idx := -1
	ForEachGPU(t, func(_ int, g *GPU) {
		if g.UUID == uuid {
			idx = g.Index
		}
	})
	return idx
}

// NUMAIDs lists the ids of t's NUMA nodes, socket by socket.
func (t *Topology) NUMAIDs() []int {
	var ids []int
	for _, s := range t.Sockets {
		for _, n := range s.NUMANodes {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// ParseCPUList parses a Linux cpulist ("0-3,8,10-11").
func ParseCPUList(s string) (map[int]bool, error) {
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
