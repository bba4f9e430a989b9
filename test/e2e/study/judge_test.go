package study

import (
	"testing"

	"flextopo.dev/e2e/internal/flextopo"
)

// TestStudyJudge checks the preemption study's alignment judge on the
// reference servers (no cluster needed).
func TestStudyJudge(t *testing.T) {
	root := "../../.."
	load := func(file string) *flextopo.Topology {
		topo, err := exampleTopology(root, file, "n")
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	rtx, a100, h100 := load("rtx4090-8x.json"), load("a100-8x.json"), load("h100-8x-mig.json")
	cpus := func(s string) map[int]bool {
		set, err := flextopo.ParseCPUList(s)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	cases := []struct {
		name  string
		topo  *flextopo.Topology
		level string
		gpus  []int
		cpus  string
		want  bool
	}{
		{"4090 one GPU, CPUs of its NUMA node", rtx, "numa", []int{2}, "16-19", true},
		{"4090 one GPU, CPUs of another NUMA node", rtx, "numa", []int{2}, "0-3", false},
		{"4090 two GPUs are never one NUMA node", rtx, "numa", []int{0, 1}, "0-3", false},
		{"4090 two GPUs of one socket", rtx, "socket", []int{0, 3}, "8-11", true},
		{"4090 has no NVLink", rtx, "nvlink", []int{0, 1}, "0-3", false},
		{"A100 NVSwitch pair, CPUs anywhere", a100, "nvlink", []int{0, 7}, "100-103", true},
		{"A100 four GPUs of NUMA 0 with its CPUs", a100, "numa", []int{0, 1, 2, 3}, "0-15", true},
		{"A100 GPUs across NUMA nodes", a100, "numa", []int{3, 4}, "0-7", false},
		{"A100 CPUs off the GPUs' NUMA node", a100, "numa", []int{4, 5}, "0-7", false},
		{"A100 one PCIe switch", a100, "pcie-switch", []int{0, 1}, "0-3", true},
		{"A100 two PCIe switches", a100, "pcie-switch", []int{1, 2}, "0-3", false},
	}
	for _, c := range cases {
		if got := judgeAligned(c.topo, c.level, c.gpus, cpus(c.cpus)); got != c.want {
			t.Errorf("%s: judgeAligned(%s, %v, %s) = %v, want %v", c.name, c.level, c.gpus, c.cpus, got, c.want)
		}
	}
	only := []struct {
		name  string
		topo  *flextopo.Topology
		level string
		want  bool
	}{
		{"A100 nvlink", a100, "nvlink", true},
		{"A100 numa", a100, "numa", false},
		{"H100 nvlink over its whole GPUs", h100, "nvlink", true},
		{"4090 nvlink", rtx, "nvlink", false},
		{"4090 numa", rtx, "numa", false},
	}
	for _, c := range only {
		if got := onlyAligned(c.topo, c.level); got != c.want {
			t.Errorf("%s: onlyAligned = %v, want %v", c.name, got, c.want)
		}
	}
	if eq := gpuEquivalents(h100); eq < 5.9 || eq > 8 {
		t.Errorf("H100 with MIG: %.2f GPU equivalents", eq)
	}
}
