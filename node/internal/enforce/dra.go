package enforce

// Pods whose GPUs Dynamic Resource Allocation chose. kube-scheduler's
// DynamicResources plugin allocated the pod's ResourceClaims; the DRA
// driver's kubelet plugin prepared them and wrote a CDI spec per claim; kubelet
// passed each container the CDI devices of the claims it uses, and the
// runtime resolved them (device nodes, environment) before NRI plugins see
// the container. So the plan for such a container sets only its cpuset and
// mems, and CheckCDI compares the CDI devices it got with the devices the
// allocation lists.
//
// NVIDIA's driver (dra-driver-nvidia-gpu, cmd/gpu-kubelet-plugin/cdi.go)
// names the CDI device of each allocated device
// k8s.gpu.nvidia.com/claim=<claim UID>-<device name>: vendor "k8s." plus the
// driver name, class "claim", one CDI device per device result.

import (
	"regexp"
	"strings"

	"flextopo.dev/node/alloc"
)

// NvidiaDriver is the DRA driver name of NVIDIA's GPU driver.
const NvidiaDriver = "gpu.nvidia.com"

// migDevice matches the name of a MIG device in NVIDIA's pool
// (gpu-<parent minor>-mig-<profile>-<profile id>-<placement start>, the
// driver's canonicalMigNameRegex) at the end of a CDI device name.
var migDevice = regexp.MustCompile(`-gpu-[0-9]+-mig-.+-[0-9]+-[0-9]+$`)

// buildDRA plans a container of a pod whose GPUs DRA chose: the cpuset and
// mems, nothing else. The GPUs are not checked against the node's inventory:
// the agent does not give them, and CheckCDI reports the ones the container
// really got.
func buildDRA(in Input) (*Plan, error) {
	a := in.Allocation
	if err := checkCPUs(a, in.Inventory); err != nil {
		return nil, err
	}
	if _, err := findContainer(in.Pod, in.Container.Name); err != nil {
		return nil, err
	}
	p := &Plan{SetEnv: map[string]string{}}
	planCPUs(p, a)
	return p, nil
}

// CDIKind is the CDI kind of a DRA driver's claim devices, by NVIDIA's
// convention.
func CDIKind(driver string) string { return "k8s." + driver + "/claim" }

// CDIName is the CDI device NVIDIA's driver writes for a device of a claim.
func CDIName(d alloc.DRADevice) string {
	return CDIKind(d.Driver) + "=" + d.ClaimUID + "-" + d.Device
}

// ContainerDevices lists the allocation's DRA devices that a container gets
// through its claims, as kubelet's DRA manager selects their CDI devices: all
// of a claim's devices, or those of the one request the container names
// (a subrequest "<request>/<subrequest>" counts as its request).
func ContainerDevices(a *alloc.Allocation, c ContainerRequest) []alloc.DRADevice {
	if a.DRA == nil {
		return nil
	}
	var out []alloc.DRADevice
	for _, d := range a.DRA.Devices {
		for _, ref := range c.Claims {
			if ref.Claim == d.Claim && (ref.Request == "" || d.Request == "" || baseRequest(d.Request) == ref.Request) {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

func baseRequest(request string) string {
	base, _, _ := strings.Cut(request, "/")
	return base
}

// CDICheck is how the CDI devices of a container compare with the devices
// the allocation lists.
type CDICheck struct {
	// GPUs and MIG are the units the container holds: the uuids of listed
	// devices whose CDI device it has, and, by their CDI name, the devices
	// of a GPU claim that the allocation does not list (units the extender
	// cannot place).
	GPUs, MIG []string
	// Unknown are the CDI devices of a GPU claim that the allocation does
	// not list.
	Unknown []string
	// Missing are the CDI names of the devices of the container's claims
	// that it did not get.
	Missing []string
}

// Drifted tells whether the container's GPUs differ from the allocation's.
func (c *CDICheck) Drifted() bool { return len(c.Unknown) > 0 || len(c.Missing) > 0 }

// CheckCDI compares the CDI devices a container got (NRI's
// Container.CDIDevices, or kubelet's PodResources) with the devices of its
// claims in the allocation. A CDI device of another kind (another driver's,
// the device plugin's nvidia.com/gpu) is not a unit of the allocation and is
// left out.
func CheckCDI(a *alloc.Allocation, c ContainerRequest, cdi []string) CDICheck {
	var out CDICheck
	if a.DRA == nil {
		return out
	}
	listed := map[string]alloc.DRADevice{}
	kinds := map[string]bool{CDIKind(NvidiaDriver): true}
	for _, d := range a.DRA.Devices {
		listed[CDIName(d)] = d
		kinds[CDIKind(d.Driver)] = true
	}
	migs := map[string]bool{}
	addAll(migs, a.MIGUUIDs())
	seen, held := map[string]bool{}, map[string]bool{}
	for _, name := range cdi {
		if seen[name] {
			continue
		}
		seen[name] = true
		kind, _, _ := strings.Cut(name, "=")
		d, ok := listed[name]
		switch {
		case ok:
			out.hold(held, d.UUID, migs[d.UUID])
		case kinds[kind]:
			out.Unknown = append(out.Unknown, name)
			out.hold(held, name, migDevice.MatchString(name))
		}
	}
	for _, d := range ContainerDevices(a, c) {
		if name := CDIName(d); !seen[name] {
			out.Missing = append(out.Missing, name)
		}
	}
	return out
}

// hold adds a unit once, to MIG or to GPUs.
func (c *CDICheck) hold(held map[string]bool, unit string, mig bool) {
	if held[unit] {
		return
	}
	held[unit] = true
	if mig {
		c.MIG = append(c.MIG, unit)
	} else {
		c.GPUs = append(c.GPUs, unit)
	}
}

func addAll(set map[string]bool, xs []string) {
	for _, x := range xs {
		set[x] = true
	}
}
