// Package inventory reads what the node has, as the enforcement needs it:
// each GPU's UUID and device minor from the NVIDIA driver's
// /proc/driver/nvidia/gpus/<PCI address>/information (lines "GPU UUID:" and
// "Device Minor:"; the NVIDIA driver README, "Procfs interface"), the online
// CPUs (/sys/devices/system/cpu/online) and NUMA nodes
// (/sys/devices/system/node/online), and MIG devices from the node's
// flextopo.io/topology annotation (gpus[].mig.instances[].uuid).
//
// The roots are parameters so tests and the stand-in GPUs of the real-node
// e2e can point them at a directory of their own.
package inventory

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"flextopo.dev/node/alloc"
	"flextopo.dev/node/internal/enforce"
)

// Roots locates the files read.
type Roots struct {
	NvidiaProc string // default /proc/driver/nvidia
	Sys        string // default /sys
}

// DefaultRoots are the host's.
var DefaultRoots = Roots{NvidiaProc: "/proc/driver/nvidia", Sys: "/sys"}

// Read builds the inventory. A node without the NVIDIA driver has no GPUs;
// that is not an error. topology is the node's flextopo.io/topology value
// ("" when unknown; MIG devices are then not checked).
func Read(r Roots, topology string) (*enforce.Inventory, error) {
	inv := &enforce.Inventory{GPUMinor: map[string]int{}}
	var err error
	if err = readGPUs(r.NvidiaProc, inv.GPUMinor); err != nil {
		return nil, err
	}
	if inv.CPUs, err = readList(filepath.Join(r.Sys, "devices/system/cpu/online")); err != nil {
		return nil, err
	}
	if inv.NUMANodes, err = readList(filepath.Join(r.Sys, "devices/system/node/online")); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		inv.NUMANodes = map[int]bool{0: true} // kernels without NUMA: node 0
	}
	if topology != "" {
		if inv.MIGParent, err = MIGParents(topology); err != nil {
			return nil, err
		}
	}
	return inv, nil
}

func readGPUs(root string, out map[string]int) error {
	infos, err := filepath.Glob(filepath.Join(root, "gpus", "*", "information"))
	if err != nil {
		return err
	}
	for _, path := range infos {
		uuid, minor, err := parseInformation(path)
		if err != nil {
			return err
		}
		out[uuid] = minor
	}
	return nil
}

func parseInformation(path string) (string, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	uuid, minor := "", -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "GPU UUID":
			uuid = strings.TrimSpace(v)
		case "Device Minor":
			minor, err = strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return "", 0, fmt.Errorf("%s: Device Minor %q: %v", path, strings.TrimSpace(v), err)
			}
		}
	}
	if err = sc.Err(); err != nil {
		return "", 0, err
	}
	if uuid == "" || minor < 0 {
		return "", 0, fmt.Errorf("%s: no \"GPU UUID\" or \"Device Minor\" line", path)
	}
	return uuid, minor, nil
}

func readList(path string) (map[int]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ids, err := alloc.ParseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	set := map[int]bool{}
	for _, id := range ids {
		set[id] = true
	}
	return set, nil
}

// MIGParents maps every MIG device UUID of a topology annotation to its GPU's
// UUID. It walks the document for GPU objects (a "uuid" and a "mig" object),
// so both placements of GPUs (under NUMA nodes and under PCIe switches) are
// found.
func MIGParents(topology string) (map[string]string, error) {
	var doc any
	if err := json.Unmarshal([]byte(topology), &doc); err != nil {
		return nil, fmt.Errorf("node annotation %s: %v", alloc.TopologyAnnotation, err)
	}
	out := map[string]string{}
	walk(doc, out)
	return out, nil
}

func walk(v any, out map[string]string) {
	switch t := v.(type) {
	case []any:
		for _, x := range t {
			walk(x, out)
		}
	case map[string]any:
		addMIG(t, out)
		for _, x := range t {
			walk(x, out)
		}
	}
}

func addMIG(gpu map[string]any, out map[string]string) {
	uuid, _ := gpu["uuid"].(string)
	mig, _ := gpu["mig"].(map[string]any)
	if uuid == "" || mig == nil {
		return
	}
	list, _ := mig["instances"].([]any)
	for _, x := range list {
		if inst, ok := x.(map[string]any); ok {
			if u, _ := inst["uuid"].(string); u != "" {
				out[u] = uuid
			}
		}
	}
}

// Summary is an inventory as flextopo-node --print-inventory shows it: what
// the agent would enforce against on this node.
type Summary struct {
	GPUs      []SummaryGPU      `json:"gpus"`
	CPUs      []int             `json:"cpus"`
	NUMANodes []int             `json:"numaNodes"`
	MIGParent map[string]string `json:"migParents,omitempty"`
}

// SummaryGPU is one GPU the driver lists, with the device node the agent
// gives a container that is allocated it.
type SummaryGPU struct {
	UUID   string `json:"uuid"`
	Minor  int    `json:"minor"`
	Device string `json:"device"`
}

// Summarize orders inv for printing: GPUs by minor, CPUs and NUMA nodes
// ascending.
func Summarize(inv *enforce.Inventory) Summary {
	s := Summary{GPUs: []SummaryGPU{}, CPUs: sortedKeys(inv.CPUs), NUMANodes: sortedKeys(inv.NUMANodes), MIGParent: inv.MIGParent}
	for uuid, minor := range inv.GPUMinor {
		s.GPUs = append(s.GPUs, SummaryGPU{UUID: uuid, Minor: minor, Device: fmt.Sprintf("/dev/nvidia%d", minor)})
	}
	sort.Slice(s.GPUs, func(i, j int) bool { return s.GPUs[i].Minor < s.GPUs[j].Minor })
	return s
}

func sortedKeys(m map[int]bool) []int {
	out := []int{}
	for k, on := range m {
		if on {
			out = append(out, k)
		}
	}
	sort.Ints(out)
	return out
}
