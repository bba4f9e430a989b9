// Package alloc reads the allocation annotation the extender writes at bind
// (flextopo.io/allocation, api/allocation.schema.json) and writes the
// observed annotation the agent reports (flextopo.io/observed,
// api/observed.schema.json). Both schemas are the single source of truth;
// the golden fixtures under test/fixtures/allocation and
// test/fixtures/observed are read by this package's tests and by the
// extender's C tests alike.
package alloc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Annotation keys on the pod.
const (
	AllocationAnnotation = "flextopo.io/allocation"
	ObservedAnnotation   = "flextopo.io/observed"
	// TopologyAnnotation is the node annotation (api/topology.schema.json).
	TopologyAnnotation = "flextopo.io/topology"
)

// Limits of api/allocation.schema.json.
const (
	maxGPUs     = 16
	maxReplicas = 100 // replicas per shared GPU (FT_REPLICAS_MAX)
	maxListed   = 64  // entries per list of units
	maxMIGStart = 7
	maxMIGSize  = 8
	maxDRA      = 144 // dra.devices
)

// MIG is one MIG instance of an allocation.
type MIG struct {
	UUID    string `json:"uuid"`
	Profile string `json:"profile"`
	GPU     string `json:"gpu"` // UUID of the parent GPU
	Start   int    `json:"start"`
	Size    int    `json:"size"`
}

// Replica is a count of replicas held on one shared GPU.
type Replica struct {
	GPU   string `json:"gpu"`
	Count int    `json:"count"`
}

// DRADevice is one device the pod's ResourceClaims hold: a result of a
// claim's status.allocation.devices (resource.k8s.io/v1), named as the claim
// names it, with the uuid attribute of the device in its ResourceSlice.
type DRADevice struct {
	Claim    string `json:"claim"` // the ResourceClaim as namespace/name
	ClaimUID string `json:"claimUID"`
	Request  string `json:"request,omitempty"` // the claim's request; "" when not given
	Driver   string `json:"driver"`            // e.g. gpu.nvidia.com
	Pool     string `json:"pool"`              // NVIDIA's driver: the node name
	Device   string `json:"device"`            // e.g. gpu-0, gpu-1-mig-1g10gb-19-0
	UUID     string `json:"uuid"`              // also in gpus (GPU-...) or mig (MIG-...)
}

// DRA is the allocation's dra key: Dynamic Resource Allocation chose the
// pod's GPUs and MIG devices, flextopo only the CPUs and memory near them.
type DRA struct {
	Devices []DRADevice `json:"devices"`
}

// Allocation is a decoded, validated flextopo.io/allocation.
type Allocation struct {
	Version    int       `json:"version"`
	Node       string    `json:"node"`
	Level      string    `json:"level"`
	Mode       string    `json:"mode"`
	GPUs       []string  `json:"gpus"`
	GPUIndexes []int     `json:"gpuIndexes"`
	MIG        []MIG     `json:"mig"`
	Replicas   []Replica `json:"replicas,omitempty"`
	CPUSet     string    `json:"cpuset"`
	NUMANodes  []int     `json:"numaNodes"`
	MemoryMiB  int64     `json:"memoryMiB"`
	// DRA is set when DRA chose the GPUs: the node agent then applies only
	// the cpuset and mems (the DRA driver's CDI devices give the GPUs).
	DRA *DRA `json:"dra,omitempty"`

	CPUs []int `json:"-"` // CPUSet parsed
}

var (
	levels = map[string]bool{"nvlink": true, "pcie-switch": true, "numa": true, "socket": true, "node": true}
	modes  = map[string]bool{"guaranteed": true, "best-effort": true}
)

// ParseAllocation decodes and validates an allocation annotation. Errors
// name the field ("allocation: gpus[1]: empty uuid"). Unknown keys are
// ignored, as every reader of the schema does.
func ParseAllocation(text string) (*Allocation, error) {
	a := &Allocation{}
	if err := strictJSON(text, a); err != nil {
		return nil, fmt.Errorf("allocation: %w", err)
	}
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("allocation: %w", err)
	}
	return a, nil
}

// strictJSON decodes one JSON object (and nothing after it) into v. Missing
// keys keep their zero values; presence is checked by the caller.
func strictJSON(text string, v any) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &probe); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	return requireKeys(probe, v)
}

func describeJSONError(err error) error {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return fmt.Errorf("%s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	return err
}

type requirer interface{ required() []string }

func requireKeys(probe map[string]json.RawMessage, v any) error {
	r, ok := v.(requirer)
	if !ok {
		return nil
	}
	for _, k := range r.required() {
		if _, ok := probe[k]; !ok {
			return fmt.Errorf("%s: required key missing", k)
		}
	}
	return nil
}

func (a *Allocation) required() []string {
	return []string{"version", "node", "level", "mode", "gpus", "gpuIndexes", "mig", "cpuset", "numaNodes", "memoryMiB"}
}

func (a *Allocation) validate() error {
	var err error
	switch {
	case a.Version != 1:
		return fmt.Errorf("version: %d is not 1", a.Version)
	case a.Node == "":
		return fmt.Errorf("node: empty")
	case !levels[a.Level]:
		return fmt.Errorf("level: %q is not one of nvlink, pcie-switch, numa, socket, node", a.Level)
	case !modes[a.Mode]:
		return fmt.Errorf("mode: %q is not guaranteed or best-effort", a.Mode)
	case len(a.GPUs) > maxGPUs:
		return fmt.Errorf("gpus: %d GPUs, at most %d", len(a.GPUs), maxGPUs)
	case a.MemoryMiB < 0:
		return fmt.Errorf("memoryMiB: %d is negative", a.MemoryMiB)
	}
	if err = checkUUIDs("gpus", a.GPUs); err != nil {
		return err
	}
	if err = a.checkMIG(); err != nil {
		return err
	}
	if err = a.checkDRA(); err != nil {
		return err
	}
	if err = checkReplicas("replicas", a.Replicas); err != nil {
		return err
	}
	if a.CPUs, err = ParseCPUList(a.CPUSet); err != nil {
		return fmt.Errorf("cpuset: %q: %v", a.CPUSet, err)
	}
	return checkNUMA(a.NUMANodes)
}

func checkUUIDs(field string, uuids []string) error {
	seen := map[string]bool{}
	for i, u := range uuids {
		if u == "" {
			return fmt.Errorf("%s[%d]: empty uuid", field, i)
		}
		if seen[u] {
			return fmt.Errorf("%s[%d]: %s listed twice", field, i, u)
		}
		seen[u] = true
	}
	return nil
}

func (a *Allocation) checkMIG() error {
	seen := map[string]bool{}
	for i, m := range a.MIG {
		switch {
		case m.UUID == "" || m.Profile == "" || m.GPU == "":
			return fmt.Errorf("mig[%d]: uuid, profile and gpu are required", i)
		case seen[m.UUID]:
			return fmt.Errorf("mig[%d]: %s listed twice", i, m.UUID)
		case m.Start < 0 || m.Start > maxMIGStart || m.Size < 1 || m.Start+m.Size > maxMIGSize:
			return fmt.Errorf("mig[%d]: placement start %d size %d is outside the GPU's 8 memory slices", i, m.Start, m.Size)
		}
		seen[m.UUID] = true
	}
	return nil
}

// checkDRA checks the dra key: every device named in full, once per claim,
// and one of the allocation's GPUs or MIG devices (the extender lists the
// claims' devices there too, so that readers of gpus and mig need not know
// DRA).
func (a *Allocation) checkDRA() error {
	if a.DRA == nil {
		return nil
	}
	if a.DRA.Devices == nil {
		return fmt.Errorf("dra.devices: required key missing")
	}
	if len(a.DRA.Devices) > maxDRA {
		return fmt.Errorf("dra.devices: %d devices, at most %d", len(a.DRA.Devices), maxDRA)
	}
	units := map[string]bool{}
	addAll(units, a.GPUs)
	addAll(units, a.MIGUUIDs())
	seen := map[[2]string]bool{}
	for i, d := range a.DRA.Devices {
		if err := d.check(); err != nil {
			return fmt.Errorf("dra.devices[%d].%w", i, err)
		}
		if !units[d.UUID] {
			return fmt.Errorf("dra.devices[%d].uuid: %s is in neither gpus nor mig", i, d.UUID)
		}
		key := [2]string{d.ClaimUID, d.Device}
		if seen[key] {
			return fmt.Errorf("dra.devices[%d]: device %s of claim %s (uid %s) listed twice", i, d.Device, d.Claim, d.ClaimUID)
		}
		seen[key] = true
	}
	return nil
}

func (d *DRADevice) check() error {
	for _, f := range []struct{ name, value string }{
		{"claim", d.Claim}, {"claimUID", d.ClaimUID}, {"driver", d.Driver},
		{"pool", d.Pool}, {"device", d.Device}, {"uuid", d.UUID},
	} {
		if f.value == "" {
			return fmt.Errorf("%s: empty", f.name)
		}
	}
	if ns, name, ok := strings.Cut(d.Claim, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("claim: %q is not namespace/name", d.Claim)
	}
	return nil
}

func checkReplicas(field string, rs []Replica) error {
	seen := map[string]bool{}
	for i, r := range rs {
		switch {
		case r.GPU == "":
			return fmt.Errorf("%s[%d].gpu: empty uuid", field, i)
		case r.Count < 1 || r.Count > maxReplicas:
			return fmt.Errorf("%s[%d].count: %d is outside 1-%d", field, i, r.Count, maxReplicas)
		case seen[r.GPU]:
			return fmt.Errorf("%s[%d].gpu: %s listed twice", field, i, r.GPU)
		}
		seen[r.GPU] = true
	}
	return nil
}

func checkNUMA(ids []int) error {
	for i, n := range ids {
		if n < 0 {
			return fmt.Errorf("numaNodes[%d]: %d is negative", i, n)
		}
	}
	return nil
}

// MIGUUIDs lists the allocation's MIG device UUIDs.
func (a *Allocation) MIGUUIDs() []string {
	out := make([]string, 0, len(a.MIG))
	for _, m := range a.MIG {
		out = append(out, m.UUID)
	}
	return out
}

// Holding is what one container, or a whole pod, holds on the node.
type Holding struct {
	GPUs     []string  `json:"gpus"`
	MIG      []string  `json:"mig"`
	Replicas []Replica `json:"replicas"`
	CPUSet   string    `json:"cpuset"`
}

// ContainerHolding is a Holding with the container's name.
type ContainerHolding struct {
	Name string `json:"name"`
	Holding
}

// Observed is flextopo.io/observed: what the node really gave the pod.
type Observed struct {
	Version int    `json:"version"`
	Node    string `json:"node"`
	// Source is SourceNRI when the agent set the devices and cpusets itself,
	// SourcePodResources when kubelet's PodResources API reported them.
	Source string `json:"source"`
	Holding
	Containers []ContainerHolding `json:"containers,omitempty"`
}

// Sources of an observation.
const (
	SourceNRI          = "nri"
	SourcePodResources = "podresources"
)

func (o *Observed) required() []string {
	return []string{"version", "node", "source", "gpus", "mig", "cpuset"}
}

// NewObserved builds the pod-level observation from per-container holdings
// (kept in the order given): the pod holds the union.
func NewObserved(node, source string, containers []ContainerHolding) *Observed {
	o := &Observed{Version: 1, Node: node, Source: source, Containers: containers}
	gpus, mig, cpus := map[string]bool{}, map[string]bool{}, map[int]bool{}
	reps := map[string]int{}
	for _, c := range containers {
		addAll(gpus, c.GPUs)
		addAll(mig, c.MIG)
		for _, r := range c.Replicas {
			reps[r.GPU] += r.Count
		}
		ids, _ := ParseCPUList(c.CPUSet)
		for _, id := range ids {
			cpus[id] = true
		}
	}
	o.GPUs, o.MIG = sortedKeys(gpus), sortedKeys(mig)
	o.Replicas = sortedReplicas(reps)
	o.CPUSet = FormatCPUList(intKeys(cpus))
	return o
}

// Encode writes the annotation value; lists are never null.
func (o *Observed) Encode() string {
	c := *o
	c.Holding = c.Holding.normalized()
	for i := range c.Containers {
		c.Containers[i].Holding = c.Containers[i].Holding.normalized()
	}
	b, _ := json.Marshal(&c) // plain strings and ints: cannot fail
	return string(b)
}

func (h Holding) normalized() Holding {
	if h.GPUs == nil {
		h.GPUs = []string{}
	}
	if h.MIG == nil {
		h.MIG = []string{}
	}
	if h.Replicas == nil {
		h.Replicas = []Replica{}
	}
	return h
}

// ParseObserved decodes and validates an observed annotation, with errors
// that name the field.
func ParseObserved(text string) (*Observed, error) {
	o := &Observed{}
	if err := strictJSON(text, o); err != nil {
		return nil, fmt.Errorf("observed: %w", err)
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("observed: %w", err)
	}
	return o, nil
}

func (o *Observed) validate() error {
	switch {
	case o.Version != 1:
		return fmt.Errorf("version: %d is not 1", o.Version)
	case o.Node == "":
		return fmt.Errorf("node: empty")
	case o.Source != SourceNRI && o.Source != SourcePodResources:
		return fmt.Errorf("source: %q is not nri or podresources", o.Source)
	}
	if err := o.Holding.validate(""); err != nil {
		return err
	}
	for i, c := range o.Containers {
		if c.Name == "" {
			return fmt.Errorf("containers[%d].name: empty", i)
		}
		if err := c.Holding.validate(fmt.Sprintf("containers[%d].", i)); err != nil {
			return err
		}
	}
	return nil
}

func (h *Holding) validate(prefix string) error {
	if len(h.GPUs) > maxListed || len(h.MIG) > maxListed || len(h.Replicas) > maxListed {
		return fmt.Errorf("%sgpus, mig, replicas: at most %d each", prefix, maxListed)
	}
	if err := checkUUIDs(prefix+"gpus", h.GPUs); err != nil {
		return err
	}
	if err := checkUUIDs(prefix+"mig", h.MIG); err != nil {
		return err
	}
	if err := checkReplicas(prefix+"replicas", h.Replicas); err != nil {
		return err
	}
	if _, err := ParseCPUList(h.CPUSet); err != nil {
		return fmt.Errorf("%scpuset: %q: %v", prefix, h.CPUSet, err)
	}
	return nil
}

func addAll(set map[string]bool, xs []string) {
	for _, x := range xs {
		set[x] = true
	}
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func intKeys(set map[int]bool) []int {
	out := make([]int, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out
}

func sortedReplicas(reps map[string]int) []Replica {
	out := make([]Replica, 0, len(reps))
	for g, n := range reps {
		out = append(out, Replica{GPU: g, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GPU < out[j].GPU })
	return out
}
