// Package enforce maps a pod's allocation (flextopo.io/allocation) onto one
// of its containers: which CPUs and memory nodes it may use, which GPU device
// nodes it sees, and the environment and mounts through which the NVIDIA
// container stack learns its GPUs. It is pure: the caller (the NRI plugin)
// supplies the container as the runtime built it, the pod's per-container
// requests and the node's inventory, and applies the Plan it gets back.
//
// How the NVIDIA stack injects GPUs (github.com/NVIDIA/k8s-device-plugin,
// deviceListStrategy; github.com/NVIDIA/nvidia-container-toolkit):
//   - envvar (the default): NVIDIA_VISIBLE_DEVICES=<uuid,...>, read by
//     nvidia-container-runtime / its prestart hook, which creates the device
//     nodes; the plugin may also return device specs (/dev/nvidiaN).
//   - volume-mounts: /dev/null bind-mounted at
//     /var/run/nvidia-container-devices/<uuid> for each device.
//   - cdi-annotations / cdi-cri: CDI devices ("nvidia.com/gpu=<uuid>"), which
//     the runtime resolves into device nodes (/dev/nvidiaN plus the control
//     nodes) before NRI plugins see the container; the spec also sets
//     NVIDIA_VISIBLE_DEVICES=void.
//
// The plan replaces the device plugin's choice in all three: it removes every
// /dev/nvidia<N> node that is not allocated to the container (and denies it
// in the device cgroup, see agent.Adjustment) and adds the allocated ones
// (major 195, minor from the driver), rewrites
// NVIDIA_VISIBLE_DEVICES when the container carried it or gets GPUs, and
// replaces the volume-mount markers when the container carried them. The
// control nodes (/dev/nvidiactl, /dev/nvidia-uvm*, /dev/nvidia-caps/*) are
// not per GPU and are left as the runtime set them.
//
// A pod whose GPUs Dynamic Resource Allocation chose (the allocation's dra
// key) gets only its cpuset and mems from the plan: the DRA driver's CDI
// devices give it its GPUs, and the plan neither adds nor removes a device,
// an environment variable or a mount (dra.go).
package enforce

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"flextopo.dev/node/alloc"
)

// VisibleDevicesEnv is the NVIDIA container toolkit's device selector.
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// DeviceMarkerDir is where the device plugin's volume-mounts strategy puts a
// /dev/null bind mount per visible device.
const DeviceMarkerDir = "/var/run/nvidia-container-devices/"

// NvidiaMajor is the character major of /dev/nvidia<N> (NVIDIA driver
// README, "Installing the NVIDIA driver": device nodes are 195, minor =
// device minor number).
const NvidiaMajor = 195

var gpuNode = regexp.MustCompile(`^/dev/nvidia([0-9]+)$`)

// Inventory is what the node has, read from the driver and sysfs.
type Inventory struct {
	// GPUMinor maps a GPU UUID to its device minor (/dev/nvidia<minor>).
	GPUMinor map[string]int
	// MIGParent maps a MIG device UUID to its GPU's UUID, where known (from
	// the node's topology); nil means MIG UUIDs are not checked.
	MIGParent map[string]string
	// CPUs and NUMANodes are the online logical CPUs and NUMA node ids.
	CPUs      map[int]bool
	NUMANodes map[int]bool
}

// Resources are the resource names that ask for GPUs.
type Resources struct {
	GPU       string // whole GPUs, or MIG instances under migStrategy single
	MIGPrefix string // "nvidia.com/mig-" + profile under migStrategy mixed
	Shared    string // replicas of shared GPUs; "" when GPU is used for them
}

// DefaultResources are the NVIDIA device plugin's names.
var DefaultResources = Resources{GPU: "nvidia.com/gpu", MIGPrefix: "nvidia.com/mig-"}

// ContainerRequest is one container of the pod spec with its GPU requests.
type ContainerRequest struct {
	Name string
	Init bool
	// Requests maps a resource name to the count asked (limits of extended
	// resources equal requests).
	Requests map[string]int64
	// Claims are the ResourceClaims whose devices the container gets.
	Claims []ClaimRef
}

// ClaimRef is a container's use of a ResourceClaim, as kubelet's DRA manager
// resolves it (pkg/kubelet/cm/dra/manager.go GetResources): a
// resources.claims entry with the pod's claim resolved to the claim object's
// name, or a request mapping of the pod's extended-resource claim.
type ClaimRef struct {
	Claim   string // the ResourceClaim as namespace/name
	Request string // one request of the claim; "" for all of them
}

// Device is a device node in the container.
type Device struct {
	Path         string
	Major, Minor int64
}

// Mount is a bind mount in the container.
type Mount struct {
	Destination, Source string
}

// Container is the container as the runtime built it, before the plan.
type Container struct {
	Name    string
	Env     []string // KEY=VALUE
	Devices []Device
	Mounts  []Mount
}

// Plan is what to change in the container.
type Plan struct {
	CPUs, Mems     string // "" leaves the cpuset as it is
	SetEnv         map[string]string
	RemoveDevices  []Device
	AddDevices     []Device
	RemoveMounts   []string
	AddMounts      []Mount
	Holding        alloc.Holding
	AdjustsDevices bool
}

// Input gathers what Build needs.
type Input struct {
	NodeName   string
	Allocation *alloc.Allocation
	Pod        []ContainerRequest // spec order: init containers, then containers
	Container  Container
	Inventory  *Inventory
	Resources  Resources
}

// Build computes the plan for one container, or an error that names the
// fault (an allocation for another node, a unit the node does not have, a
// container asking for more than the allocation holds).
func Build(in Input) (*Plan, error) {
	a := in.Allocation
	if a.Node != in.NodeName {
		return nil, fmt.Errorf("allocation is for node %q, this is node %q", a.Node, in.NodeName)
	}
	if a.DRA != nil {
		return buildDRA(in)
	}
	if err := checkDevices(a, in.Inventory); err != nil {
		return nil, err
	}
	if err := checkCPUs(a, in.Inventory); err != nil {
		return nil, err
	}
	share, err := containerShare(a, in.Pod, in.Container.Name, in.Resources)
	if err != nil {
		return nil, err
	}
	p := &Plan{SetEnv: map[string]string{}}
	p.Holding = share
	planCPUs(p, a)
	planDevices(p, a, &in)
	return p, nil
}

// planCPUs pins every container of the pod to the allocation's CPUs and the
// memory of its NUMA nodes.
func planCPUs(p *Plan, a *alloc.Allocation) {
	if a.CPUSet != "" {
		p.CPUs, p.Mems = a.CPUSet, alloc.FormatCPUList(a.NUMANodes)
		p.Holding.CPUSet = a.CPUSet
	}
}

func checkDevices(a *alloc.Allocation, inv *Inventory) error {
	for _, g := range a.GPUs {
		if _, ok := inv.GPUMinor[g]; !ok {
			return fmt.Errorf("allocation names GPU %s, which this node does not have (GPUs here: %s)", g, gpuList(inv))
		}
	}
	for _, r := range a.Replicas {
		if _, ok := inv.GPUMinor[r.GPU]; !ok {
			return fmt.Errorf("allocation names shared GPU %s, which this node does not have (GPUs here: %s)", r.GPU, gpuList(inv))
		}
	}
	for _, m := range a.MIG {
		if err := checkMIG(m, inv); err != nil {
			return err
		}
	}
	return nil
}

func checkCPUs(a *alloc.Allocation, inv *Inventory) error {
	for _, c := range a.CPUs {
		if !inv.CPUs[c] {
			return fmt.Errorf("allocation cpuset %s names CPU %d, which is not online here (online: %s)", a.CPUSet, c, alloc.FormatCPUList(keys(inv.CPUs)))
		}
	}
	for _, n := range a.NUMANodes {
		if !inv.NUMANodes[n] {
			return fmt.Errorf("allocation names NUMA node %d, which this node does not have (NUMA nodes: %s)", n, alloc.FormatCPUList(keys(inv.NUMANodes)))
		}
	}
	return nil
}

func checkMIG(m alloc.MIG, inv *Inventory) error {
	if _, ok := inv.GPUMinor[m.GPU]; !ok {
		return fmt.Errorf("allocation names MIG device %s on GPU %s, which this node does not have (GPUs here: %s)", m.UUID, m.GPU, gpuList(inv))
	}
	if inv.MIGParent == nil {
		return nil
	}
	if parent, ok := inv.MIGParent[m.UUID]; !ok || parent != m.GPU {
		return fmt.Errorf("allocation names MIG device %s (%s on %s), which this node does not have", m.UUID, m.Profile, m.GPU)
	}
	return nil
}

func gpuList(inv *Inventory) string {
	var s []string
	for u := range inv.GPUMinor {
		s = append(s, u)
	}
	if len(s) == 0 {
		return "none"
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

func keys(m map[int]bool) []int {
	var out []int
	for k, ok := range m {
		if ok {
			out = append(out, k)
		}
	}
	return out
}

// pool hands out the allocation's units in order.
type pool struct {
	gpus     []string
	mig      []alloc.MIG
	replicas []alloc.Replica
}

func newPool(a *alloc.Allocation) *pool {
	return &pool{
		gpus:     append([]string(nil), a.GPUs...),
		mig:      append([]alloc.MIG(nil), a.MIG...),
		replicas: append([]alloc.Replica(nil), a.Replicas...),
	}
}

// containerShare splits the allocation over the pod's containers as kubelet's
// device manager splits devices: app containers in spec order each take their
// own units; an init container takes units from the start of the pod's list
// (init containers run before the app containers and their devices are
// reused, pkg/kubelet/cm/devicemanager/manager.go allocateContainerResources).
func containerShare(a *alloc.Allocation, pod []ContainerRequest, name string, res Resources) (alloc.Holding, error) {
	target, err := findContainer(pod, name)
	if err != nil {
		return alloc.Holding{}, err
	}
	if target.Init {
		return take(newPool(a), *target, res)
	}
	p := newPool(a)
	for _, c := range pod {
		if c.Init {
			continue
		}
		h, err := take(p, c, res)
		if err != nil || c.Name == name {
			return h, err
		}
	}
	return alloc.Holding{}, nil
}

func findContainer(pod []ContainerRequest, name string) (*ContainerRequest, error) {
	for i := range pod {
		if pod[i].Name == name {
			return &pod[i], nil
		}
	}
	return nil, fmt.Errorf("container %q is not in the pod spec", name)
}

func take(p *pool, c ContainerRequest, res Resources) (alloc.Holding, error) {
	var h alloc.Holding
	names := make([]string, 0, len(c.Requests))
	for r := range c.Requests {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		if err := takeResource(p, &h, r, c.Requests[r], res); err != nil {
			return h, fmt.Errorf("container %q: %w", c.Name, err)
		}
	}
	return h, nil
}

func takeResource(p *pool, h *alloc.Holding, r string, n int64, res Resources) error {
	switch {
	case r == res.Shared && res.Shared != "":
		return takeReplicas(p, h, r, n)
	case r == res.GPU:
		return takeGPUs(p, h, r, n)
	case strings.HasPrefix(r, res.MIGPrefix):
		return takeMIG(p, h, r, strings.TrimPrefix(r, res.MIGPrefix), n)
	}
	return nil
}

// takeGPUs takes whole GPUs; under migStrategy single the same resource names
// MIG instances, and on shared GPUs (sharedResource unset) replicas.
func takeGPUs(p *pool, h *alloc.Holding, r string, n int64) error {
	for ; n > 0 && len(p.gpus) > 0; n-- {
		h.GPUs, p.gpus = append(h.GPUs, p.gpus[0]), p.gpus[1:]
	}
	for ; n > 0 && len(p.mig) > 0; n-- {
		h.MIG, p.mig = append(h.MIG, p.mig[0].UUID), p.mig[1:]
	}
	if n > 0 && len(p.replicas) > 0 {
		return takeReplicas(p, h, r, n)
	}
	if n > 0 {
		return fmt.Errorf("requests %d more %s than the allocation holds", n, r)
	}
	return nil
}

func takeMIG(p *pool, h *alloc.Holding, r, profile string, n int64) error {
	for i := 0; n > 0 && i < len(p.mig); {
		if p.mig[i].Profile != profile {
			i++
			continue
		}
		h.MIG = append(h.MIG, p.mig[i].UUID)
		p.mig = append(p.mig[:i], p.mig[i+1:]...)
		n--
	}
	if n > 0 {
		return fmt.Errorf("requests %d more %s than the allocation holds", n, r)
	}
	return nil
}

func takeReplicas(p *pool, h *alloc.Holding, r string, n int64) error {
	for n > 0 && len(p.replicas) > 0 {
		got := min(n, int64(p.replicas[0].Count))
		h.Replicas = append(h.Replicas, alloc.Replica{GPU: p.replicas[0].GPU, Count: int(got)})
		p.replicas[0].Count -= int(got)
		if p.replicas[0].Count == 0 {
			p.replicas = p.replicas[1:]
		}
		n -= got
	}
	if n > 0 {
		return fmt.Errorf("requests %d more %s than the allocation holds", n, r)
	}
	return nil
}

// visible lists the UUIDs the NVIDIA stack should expose: whole and shared
// GPUs, then MIG devices.
func visible(h alloc.Holding) []string {
	out := append([]string(nil), h.GPUs...)
	for _, r := range h.Replicas {
		out = append(out, r.GPU)
	}
	return append(out, h.MIG...)
}

// physical lists the GPUs whose /dev/nvidia<N> the container needs: its
// whole and shared GPUs and the parents of its MIG devices.
func physical(h alloc.Holding, a *alloc.Allocation) []string {
	seen := map[string]bool{}
	var out []string
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, u := range h.GPUs {
		add(u)
	}
	for _, r := range h.Replicas {
		add(r.GPU)
	}
	for _, m := range a.MIG {
		for _, u := range h.MIG {
			if u == m.UUID {
				add(m.GPU)
			}
		}
	}
	return out
}

func planDevices(p *Plan, a *alloc.Allocation, in *Input) {
	c := &in.Container
	want := map[string]Device{}
	for _, u := range physical(p.Holding, a) {
		m := int64(in.Inventory.GPUMinor[u])
		want["/dev/nvidia"+strconv.FormatInt(m, 10)] = Device{Path: "/dev/nvidia" + strconv.FormatInt(m, 10), Major: NvidiaMajor, Minor: m}
	}
	had := injected(c)
	if len(want) == 0 && !had {
		return // neither asked for GPUs nor given any: not ours to touch
	}
	p.AdjustsDevices = true
	present := map[string]bool{}
	for _, d := range c.Devices {
		if gpuNode.MatchString(d.Path) {
			present[d.Path] = true
			if _, ok := want[d.Path]; !ok {
				p.RemoveDevices = append(p.RemoveDevices, d)
			}
		}
	}
	for path, d := range want {
		if !present[path] {
			p.AddDevices = append(p.AddDevices, d)
		}
	}
	sort.Slice(p.AddDevices, func(i, j int) bool { return p.AddDevices[i].Minor < p.AddDevices[j].Minor })
	uuids := visible(p.Holding)
	p.SetEnv[VisibleDevicesEnv] = visibleValue(uuids)
	planMarkers(p, c, uuids)
}

// injected tells whether the runtime gave the container any GPU, by any of
// the device plugin's strategies.
func injected(c *Container) bool {
	for _, d := range c.Devices {
		if gpuNode.MatchString(d.Path) {
			return true
		}
	}
	for _, m := range c.Mounts {
		if strings.HasPrefix(m.Destination, DeviceMarkerDir) {
			return true
		}
	}
	for _, e := range c.Env {
		if k, v, _ := strings.Cut(e, "="); k == VisibleDevicesEnv && v != "" && v != "void" && v != "none" {
			return true
		}
	}
	return false
}

// visibleValue is "void" when the container gets no GPU: the toolkit then
// exposes none (nvidia-container-toolkit, "Environment variables").
func visibleValue(uuids []string) string {
	if len(uuids) == 0 {
		return "void"
	}
	return strings.Join(uuids, ",")
}

func planMarkers(p *Plan, c *Container, uuids []string) {
	used := false
	want := map[string]bool{}
	for _, u := range uuids {
		want[DeviceMarkerDir+u] = true
	}
	have := map[string]bool{}
	for _, m := range c.Mounts {
		if !strings.HasPrefix(m.Destination, DeviceMarkerDir) {
			continue
		}
		used, have[m.Destination] = true, true
		if !want[m.Destination] {
			p.RemoveMounts = append(p.RemoveMounts, m.Destination)
		}
	}
	if !used {
		return
	}
	for _, u := range uuids {
		if !have[DeviceMarkerDir+u] {
			p.AddMounts = append(p.AddMounts, Mount{Destination: DeviceMarkerDir + u, Source: "/dev/null"})
		}
	}
}
