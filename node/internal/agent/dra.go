package agent

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"flextopo.dev/node/alloc"
	"flextopo.dev/node/internal/enforce"
)

// draView maps the CDI devices of a DRA pod's containers through its
// allocation (enforce.CheckCDI), so that the observation names the GPUs and
// MIG devices the containers really got. A container's CDI devices are the
// ones the runtime reported to NRI (containerd >= 2.3), else the ones kubelet
// passed it, from the PodResources API (List: dynamicResources, on in
// Kubernetes >= 1.34); when neither knows the container (an init container
// that ran, kubelet unreachable), it holds what the allocation gives its
// claims.
type draView struct {
	a          *alloc.Allocation
	containers map[string]enforce.ContainerRequest
	kubelet    map[string][]string // container -> CDI devices; absent: not listed
	drift      []string
}

// newDRAView is nil for a pod whose allocation has no dra key (or none).
func newDRAView(pod *corev1.Pod, allocation string, pr *podresourcesapi.PodResources) *draView {
	a, err := alloc.ParseAllocation(allocation)
	if err != nil || a.DRA == nil {
		return nil
	}
	v := &draView{a: a, containers: map[string]enforce.ContainerRequest{}, kubelet: map[string][]string{}}
	for _, c := range Requests(pod) {
		v.containers[c.Name] = c
	}
	for _, c := range pr.GetContainers() {
		v.kubelet[c.GetName()] = kubeletCDIDevices(c)
	}
	return v
}

func kubeletCDIDevices(c *podresourcesapi.ContainerResources) []string {
	out := []string{}
	for _, dr := range c.GetDynamicResources() {
		for _, cr := range dr.GetClaimResources() {
			for _, d := range cr.GetCdiDevices() {
				out = append(out, d.GetName())
			}
		}
	}
	return out
}

// holding gives a container's holding the GPUs and MIG devices of its CDI
// devices (runtime: those the runtime reported) and notes the differences.
func (v *draView) holding(name string, h alloc.Holding, runtime []string) alloc.Holding {
	if v == nil {
		return h
	}
	c := v.containers[name]
	cdi, listed := runtime, true
	if len(cdi) == 0 {
		cdi, listed = v.kubelet[name]
	}
	if !listed {
		for _, d := range enforce.ContainerDevices(v.a, c) {
			cdi = append(cdi, enforce.CDIName(d))
		}
	}
	check := enforce.CheckCDI(v.a, c, cdi)
	for _, u := range check.Unknown {
		v.drift = append(v.drift, fmt.Sprintf("container %s has CDI device %s, which the allocation does not list", name, u))
	}
	for _, m := range check.Missing {
		v.drift = append(v.drift, fmt.Sprintf("container %s lacks CDI device %s of its claims", name, m))
	}
	h.GPUs = union(h.GPUs, check.GPUs)
	h.MIG = union(h.MIG, check.MIG)
	return h
}

func (v *draView) notes() []string {
	if v == nil {
		return nil
	}
	return v.drift
}

// union is a and b without repeats, sorted.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
