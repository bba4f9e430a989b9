// Package agent is flextopo-node: the NRI plugin that gives each container
// the GPUs, MIG devices and CPUs of its pod's allocation (enforce mode), and
// the reporter that writes what the node really assigned onto the pod
// (flextopo.io/observed) in every mode.
package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/containerd/nri/pkg/api"
	corev1 "k8s.io/api/core/v1"

	"flextopo.dev/node/alloc"
	"flextopo.dev/node/internal/enforce"
)

// PodSource finds the pod spec of a sandbox (the informer's cache, falling
// back to the API server).
type PodSource interface {
	Pod(ctx context.Context, namespace, name, uid string) (*corev1.Pod, error)
}

// InventorySource returns the node's current inventory.
type InventorySource func() (*enforce.Inventory, error)

// Plugin is the NRI plugin. Its methods are called by the NRI stub.
type Plugin struct {
	Node      string
	Resources enforce.Resources
	Pods      PodSource
	Inventory InventorySource
	Record    *Record
	Log       *slog.Logger
	Metrics   *Metrics

	mu     sync.Mutex
	cpuset map[string]string // container id -> cpuset the plugin set
}

// Synchronize records what the containers that already run hold, read from
// their specs (and the CDI devices the runtime reports), so a restarted agent
// reports the truth at once.
func (p *Plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	inv, err := p.Inventory()
	if err != nil {
		p.Log.Warn("synchronize: inventory", "err", err)
		return nil, nil
	}
	byID := map[string]*api.PodSandbox{}
	for _, s := range pods {
		byID[s.Id] = s
	}
	for _, c := range ctrs {
		s := byID[c.PodSandboxId]
		if s == nil || s.Annotations[alloc.AllocationAnnotation] == "" {
			continue
		}
		e := entryOf(c, inv, s.Annotations[alloc.AllocationAnnotation])
		p.remember(c.Id, e.CPUSet)
		p.Record.Applied(podKey(s), c.Name, e)
	}
	return nil, nil
}

// entryOf reads what a running container holds from its spec. For a pod
// whose GPUs DRA chose, that is its cpuset: its GPU device nodes come from
// the DRA driver's CDI devices, which the reporter maps through the
// allocation.
func entryOf(c *api.Container, inv *enforce.Inventory, allocation string) Entry {
	e := Entry{Holding: HoldingOf(c, inv), CDIDevices: cdiDevices(c)}
	if a, err := alloc.ParseAllocation(allocation); err == nil && a.DRA != nil {
		e.Holding = alloc.Holding{CPUSet: e.CPUSet}
	}
	return e
}

// gpuNodes lists the /dev/nvidia* nodes the runtime put in the container
// before the plugin's adjustment (device plugin specs, resolved CDI devices).
func gpuNodes(c *api.Container) string {
	var out []string
	for _, d := range c.GetLinux().GetDevices() {
		if strings.HasPrefix(d.Path, "/dev/nvidia") {
			out = append(out, d.Path)
		}
	}
	return strings.Join(out, ",")
}

// cdiDevices lists the CDI devices the runtime reports for the container
// (NRI's Container.CDI_devices, api.proto field 20).
func cdiDevices(c *api.Container) []string {
	var out []string
	for _, d := range c.GetCDIDevices() {
		out = append(out, d.GetName())
	}
	return out
}

// CreateContainer applies the allocation to the container, or refuses it
// with the fault. A pod without an allocation is left alone.
func (p *Plugin) CreateContainer(ctx context.Context, s *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	text, ok := s.Annotations[alloc.AllocationAnnotation]
	if !ok {
		return nil, nil, nil
	}
	plan, err := p.plan(ctx, s, c, text)
	if err != nil {
		p.Metrics.refused.Inc()
		err = fmt.Errorf("flextopo-node: pod %s/%s container %s: %w", s.Namespace, s.Name, c.Name, err)
		p.Log.Error("refused container", "pod", s.Namespace+"/"+s.Name, "container", c.Name, "err", err)
		return nil, nil, err
	}
	p.Metrics.adjusted.Inc()
	p.remember(c.Id, plan.CPUs)
	cdi := cdiDevices(c)
	p.Record.Applied(podKey(s), c.Name, Entry{Holding: plan.Holding, CDIDevices: cdi})
	p.Log.Info("adjusted container", "pod", s.Namespace+"/"+s.Name, "container", c.Name,
		"cpus", plan.CPUs, "mems", plan.Mems, "gpus", strings.Join(plan.Holding.GPUs, ","),
		"mig", strings.Join(plan.Holding.MIG, ","), "cdi", strings.Join(cdi, ","), "devnodes", gpuNodes(c))
	return Adjustment(plan), nil, nil
}

func (p *Plugin) plan(ctx context.Context, s *api.PodSandbox, c *api.Container, text string) (*enforce.Plan, error) {
	a, err := alloc.ParseAllocation(text)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", alloc.AllocationAnnotation, err)
	}
	pod, err := p.Pods.Pod(ctx, s.Namespace, s.Name, s.Uid)
	if err != nil {
		return nil, fmt.Errorf("pod spec: %w", err)
	}
	inv, err := p.Inventory()
	if err != nil {
		return nil, fmt.Errorf("node inventory: %w", err)
	}
	return enforce.Build(enforce.Input{
		NodeName:   p.Node,
		Allocation: a,
		Pod:        Requests(pod),
		Container:  containerOf(c),
		Inventory:  inv,
		Resources:  p.Resources,
	})
}

// UpdateContainer keeps the allocated cpuset when kubelet (its CPU manager's
// reconcile loop) updates the container's resources.
func (p *Plugin) UpdateContainer(_ context.Context, _ *api.PodSandbox, c *api.Container, r *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	cpus := p.cpuset[c.Id]
	p.mu.Unlock()
	if cpus == "" || r.GetCpu().GetCpus() == cpus {
		return nil, nil
	}
	u := &api.ContainerUpdate{}
	u.SetContainerId(c.Id)
	u.SetLinuxCPUSetCPUs(cpus)
	return []*api.ContainerUpdate{u}, nil
}

// RemoveContainer forgets the container.
func (p *Plugin) RemoveContainer(_ context.Context, s *api.PodSandbox, c *api.Container) error {
	p.mu.Lock()
	delete(p.cpuset, c.Id)
	p.mu.Unlock()
	p.Record.Removed(podKey(s), c.Name)
	return nil
}

// RemovePodSandbox forgets the pod.
func (p *Plugin) RemovePodSandbox(_ context.Context, s *api.PodSandbox) error {
	p.Record.Forget(podKey(s))
	return nil
}

func (p *Plugin) remember(id, cpus string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cpuset == nil {
		p.cpuset = map[string]string{}
	}
	if cpus != "" {
		p.cpuset[id] = cpus
	}
}

func podKey(s *api.PodSandbox) PodKey {
	return PodKey{Namespace: s.Namespace, Name: s.Name, UID: s.Uid}
}

// Requests lists the pod's containers, init containers first, with their
// extended-resource limits (which kubelet requires to equal requests) and
// the ResourceClaims they use.
func Requests(pod *corev1.Pod) []enforce.ContainerRequest {
	var out []enforce.ContainerRequest
	names := claimNames(pod)
	add := func(cs []corev1.Container, init bool) {
		for _, c := range cs {
			r := enforce.ContainerRequest{Name: c.Name, Init: init, Requests: map[string]int64{},
				Claims: containerClaims(pod, &c, names)}
			for name, q := range c.Resources.Limits {
				if strings.Contains(string(name), "/") {
					r.Requests[string(name)] = q.Value()
				}
			}
			out = append(out, r)
		}
	}
	add(pod.Spec.InitContainers, true)
	add(pod.Spec.Containers, false)
	return out
}

// claimNames maps the pod's claims (spec.resourceClaims) to the names of
// their ResourceClaim objects, as kubelet resolves them
// (k8s.io/dynamic-resource-allocation/resourceclaim.Name): the claim named
// in the spec, or the one the resourceclaim controller generated from a
// template and recorded in status.resourceClaimStatuses. A claim not
// generated (yet) has no entry.
func claimNames(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			out[c.Name] = *c.ResourceClaimName
		}
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if _, named := out[st.Name]; !named && st.ResourceClaimName != nil {
			out[st.Name] = *st.ResourceClaimName
		}
	}
	return out
}

// containerClaims lists the claims whose devices kubelet gives the
// container (pkg/kubelet/cm/dra/manager.go GetResources): its
// resources.claims, and the requests of the pod's extended-resource claim
// (KEP-5004) mapped to an extended resource the container asks for.
func containerClaims(pod *corev1.Pod, c *corev1.Container, names map[string]string) []enforce.ClaimRef {
	var out []enforce.ClaimRef
	for _, rc := range c.Resources.Claims {
		if name, ok := names[rc.Name]; ok {
			out = append(out, enforce.ClaimRef{Claim: pod.Namespace + "/" + name, Request: rc.Request})
		}
	}
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil {
		return out
	}
	for _, m := range st.RequestMappings {
		q, asked := c.Resources.Requests[corev1.ResourceName(m.ResourceName)]
		if m.ContainerName == c.Name && asked && !q.IsZero() {
			out = append(out, enforce.ClaimRef{Claim: pod.Namespace + "/" + st.ResourceClaimName, Request: m.RequestName})
		}
	}
	return out
}

func containerOf(c *api.Container) enforce.Container {
	out := enforce.Container{Name: c.Name, Env: c.Env}
	for _, d := range c.GetLinux().GetDevices() {
		out.Devices = append(out.Devices, enforce.Device{Path: d.Path, Major: d.Major, Minor: d.Minor})
	}
	for _, m := range c.Mounts {
		out.Mounts = append(out.Mounts, enforce.Mount{Destination: m.Destination, Source: m.Source})
	}
	return out
}

// Adjustment turns a plan into NRI's container adjustment.
func Adjustment(p *enforce.Plan) *api.ContainerAdjustment {
	adj := &api.ContainerAdjustment{}
	if p.CPUs != "" {
		adj.SetLinuxCPUSetCPUs(p.CPUs)
	}
	if p.Mems != "" {
		adj.SetLinuxCPUSetMems(p.Mems)
	}
	keys := make([]string, 0, len(p.SetEnv))
	for k := range p.SetEnv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		adj.AddEnv(k, p.SetEnv[k])
	}
	for _, d := range p.RemoveDevices {
		adj.RemoveDevice(d.Path)
	}
	for _, d := range p.AddDevices {
		adj.AddDevice(&api.LinuxDevice{Path: d.Path, Type: "c", Major: d.Major, Minor: d.Minor,
			FileMode: api.FileMode(0o666)})
	}
	for _, dst := range p.RemoveMounts {
		adj.RemoveMount(dst)
	}
	for _, m := range p.AddMounts {
		adj.AddMount(&api.Mount{Destination: m.Destination, Source: m.Source, Type: "bind",
			Options: []string{"ro", "nosuid", "nodev", "bind"}})
	}
	denyDevices(adj, p.RemoveDevices)
	return adj
}

// denyDevices denies the removed GPU nodes in the device cgroup. NRI
// (v0.12, pkg/adaptation result.adjustDevices) forwards a plugin's device
// removals only for devices an earlier plugin added, not for those the runtime
// put in the spec (the device plugin's DeviceSpecs, CDI), so the node may stay
// in the container; the deny rule, after the runtime's allow rules, makes it
// unusable (runc applies device rules in order, the last match wins). Added
// devices get their allow rule from the runtime (generate.AdjustDevices).
func denyDevices(adj *api.ContainerAdjustment, removed []enforce.Device) {
	if len(removed) == 0 {
		return
	}
	if adj.Linux == nil {
		adj.Linux = &api.LinuxContainerAdjustment{}
	}
	if adj.Linux.Resources == nil {
		adj.Linux.Resources = &api.LinuxResources{}
	}
	for _, d := range removed {
		adj.Linux.Resources.Devices = append(adj.Linux.Resources.Devices, &api.LinuxDeviceCgroup{
			Allow: false, Type: "c", Major: api.Int64(d.Major), Minor: api.Int64(d.Minor), Access: "rwm"})
	}
}

// HoldingOf reads what a running container holds from its spec: its cpuset,
// and its GPUs from the /dev/nvidia<N> nodes (minor -> UUID by the
// inventory) and NVIDIA_VISIBLE_DEVICES (MIG UUIDs).
func HoldingOf(c *api.Container, inv *enforce.Inventory) alloc.Holding {
	h := alloc.Holding{CPUSet: c.GetLinux().GetResources().GetCpu().GetCpus()}
	byMinor := map[int64]string{}
	for u, m := range inv.GPUMinor {
		byMinor[int64(m)] = u
	}
	for _, d := range c.GetLinux().GetDevices() {
		if u, ok := byMinor[d.Minor]; ok && d.Major == enforce.NvidiaMajor && strings.HasPrefix(d.Path, "/dev/nvidia") {
			h.GPUs = append(h.GPUs, u)
		}
	}
	for _, e := range c.Env {
		if k, v, _ := strings.Cut(e, "="); k == enforce.VisibleDevicesEnv {
			for _, u := range strings.Split(v, ",") {
				if strings.HasPrefix(u, "MIG-") {
					h.MIG = append(h.MIG, u)
				}
			}
		}
	}
	if ids, err := alloc.ParseCPUList(h.CPUSet); err == nil {
		h.CPUSet = alloc.FormatCPUList(ids)
	}
	return h
}
