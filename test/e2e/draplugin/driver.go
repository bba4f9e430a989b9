package main

// The driver's side that needs no kubelet: the node's stand-in GPUs from the
// configuration file, the ResourceSlice devices NVIDIA's driver would publish
// for them, and the CDI spec it would write for a prepared claim.
//
// Shapes follow dra-driver-nvidia-gpu (cmd/gpu-kubelet-plugin): one pool per
// node named after the node; devices gpu-<minor> with the driver's type,
// uuid and productName attributes, the standard resource.kubernetes.io
// pciBusID, pcieRoot and numaNode (int), and capacity memory (deviceinfo.go);
// one transient CDI spec per claim, <cdi root>/k8s.gpu.nvidia.com-claim_<claim
// UID>.yaml, kind k8s.gpu.nvidia.com/claim, a device <claim UID>-<device> per
// allocated device, and NVIDIA_VISIBLE_DEVICES=void for the whole spec
// (cdi.go). The device edits are the stand-in's own: the GPU's device node,
// and GPU_DEVICE_<minor>=<uuid> as the upstream example driver names its GPUs
// to the container.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

const (
	driverName = "gpu.nvidia.com"
	cdiKind    = "k8s." + driverName + "/claim"
	// cdiVersion is the CDI spec version of the edits used (device nodes,
	// env); containerd 2.2 reads up to 1.1.0.
	cdiVersion = "0.5.0"
)

// GPU is one stand-in GPU of the node, as the configuration lists it.
type GPU struct {
	UUID     string `json:"uuid"`
	Minor    int    `json:"minor"`    // /dev/nvidia<minor>; the device is gpu-<minor>
	NUMANode int    `json:"numaNode"` // -1: unknown, the attribute is left out as NVIDIA's driver does
	PCIBusID string `json:"pciBusID"` // e.g. 0000:07:00.0
	// PCIeRoot is the PCI root bus (resource.kubernetes.io/pcieRoot); by
	// default pci<domain>:00, the first root bus of the bus id's domain.
	PCIeRoot    string `json:"pcieRoot,omitempty"`
	ProductName string `json:"productName,omitempty"`
	Memory      string `json:"memory,omitempty"` // a quantity, e.g. 80Gi
	// DevicePath is the host path of the GPU's device node, injected as
	// /dev/nvidia<minor>; by default /dev/nvidia<minor> itself.
	DevicePath string `json:"devicePath,omitempty"`
}

// Config is the configuration file: the node's stand-in GPUs.
type Config struct {
	GPUs []GPU `json:"gpus"`
}

// Defaults of a GPU the configuration leaves open.
const (
	defaultProduct = "NVIDIA A100-SXM4-80GB"
	defaultMemory  = "80Gi"
)

// readConfig reads and checks the configuration file (YAML or JSON).
func readConfig(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg := &Config{}
	if err := yaml.UnmarshalStrict(raw, cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := cfg.complete(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// complete fills the defaults and refuses what NVIDIA's driver could not
// publish: no GPU, a GPU without uuid or bus id, a minor or uuid twice.
func (c *Config) complete() error {
	if len(c.GPUs) == 0 {
		return errors.New("gpus: none listed")
	}
	uuids, minors := map[string]bool{}, map[int]bool{}
	for i := range c.GPUs {
		g := &c.GPUs[i]
		switch {
		case g.UUID == "":
			return fmt.Errorf("gpus[%d].uuid: empty", i)
		case g.PCIBusID == "":
			return fmt.Errorf("gpus[%d].pciBusID: empty", i)
		case g.Minor < 0:
			return fmt.Errorf("gpus[%d].minor: %d is negative", i, g.Minor)
		case uuids[g.UUID]:
			return fmt.Errorf("gpus[%d].uuid: %s listed twice", i, g.UUID)
		case minors[g.Minor]:
			return fmt.Errorf("gpus[%d].minor: %d listed twice", i, g.Minor)
		}
		uuids[g.UUID], minors[g.Minor] = true, true
		if err := g.complete(); err != nil {
			return fmt.Errorf("gpus[%d].%w", i, err)
		}
	}
	return nil
}

func (g *GPU) complete() error {
	domain, _, ok := strings.Cut(g.PCIBusID, ":")
	if !ok {
		return fmt.Errorf("pciBusID: %q is not <domain>:<bus>:<device>.<function>", g.PCIBusID)
	}
	if g.PCIeRoot == "" {
		g.PCIeRoot = "pci" + domain + ":00"
	}
	if g.ProductName == "" {
		g.ProductName = defaultProduct
	}
	if g.Memory == "" {
		g.Memory = defaultMemory
	}
	if _, err := resource.ParseQuantity(g.Memory); err != nil {
		return fmt.Errorf("memory: %q: %v", g.Memory, err)
	}
	if g.DevicePath == "" {
		g.DevicePath = g.nodePath()
	}
	return nil
}

// Name is the device's name in the pool (deviceinfo.go CanonicalName).
func (g *GPU) Name() string { return fmt.Sprintf("gpu-%d", g.Minor) }

// nodePath is the GPU's device node in the container.
func (g *GPU) nodePath() string { return fmt.Sprintf("/dev/nvidia%d", g.Minor) }

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

// Device is the GPU as NVIDIA's driver publishes it in the pool.
func (g *GPU) Device() resourceapi.Device {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type":                            str("gpu"),
		"uuid":                            str(g.UUID),
		"productName":                     str(g.ProductName),
		"resource.kubernetes.io/pciBusID": str(g.PCIBusID),
		"resource.kubernetes.io/pcieRoot": str(g.PCIeRoot),
	}
	if g.NUMANode >= 0 {
		n := int64(g.NUMANode)
		attrs["resource.kubernetes.io/numaNode"] = resourceapi.DeviceAttribute{IntValue: &n}
	}
	return resourceapi.Device{
		Name:       g.Name(),
		Attributes: attrs,
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: resource.MustParse(g.Memory)},
		},
	}
}

// Resources are the node's pool: one slice of all its GPUs, by minor.
func (c *Config) Resources(node string) resourceslice.DriverResources {
	gpus := slices.Clone(c.GPUs)
	slices.SortFunc(gpus, func(a, b GPU) int { return a.Minor - b.Minor })
	var devices []resourceapi.Device
	for i := range gpus {
		devices = append(devices, gpus[i].Device())
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		node: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
}

// CDIName is the CDI device of a device of a claim (cdi.go GetClaimDeviceName).
func CDIName(claimUID types.UID, device string) string {
	return cdiKind + "=" + string(claimUID) + "-" + device
}

// specPath is the claim's transient CDI spec (GenerateTransientSpecName).
func specPath(root string, claimUID types.UID) string {
	return filepath.Join(root, "k8s."+driverName+"-claim_"+string(claimUID)+".yaml")
}

// The CDI spec, as much of it as the stand-in writes
// (tags.cncf.io/container-device-interface specs-go).
type cdiSpec struct {
	Version        string      `json:"cdiVersion"`
	Kind           string      `json:"kind"`
	Devices        []cdiDevice `json:"devices"`
	ContainerEdits cdiEdits    `json:"containerEdits,omitempty"`
}

type cdiDevice struct {
	Name           string   `json:"name"`
	ContainerEdits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env         []string        `json:"env,omitempty"`
	DeviceNodes []cdiDeviceNode `json:"deviceNodes,omitempty"`
}

type cdiDeviceNode struct {
	Path     string `json:"path"`
	HostPath string `json:"hostPath,omitempty"`
}

// Driver prepares claims of the node's stand-in GPUs.
type Driver struct {
	Node    string
	CDIRoot string
	GPUs    map[string]*GPU // by device name
	// Fatal is called with a background error the driver cannot recover
	// from (kubeletplugin.DRAPlugin.HandleError).
	Fatal func(error)
}

// NewDriver serves the configuration's GPUs on the node.
func NewDriver(node, cdiRoot string, cfg *Config, fatal func(error)) *Driver {
	d := &Driver{Node: node, CDIRoot: cdiRoot, GPUs: map[string]*GPU{}, Fatal: fatal}
	for i := range cfg.GPUs {
		d.GPUs[cfg.GPUs[i].Name()] = &cfg.GPUs[i]
	}
	return d
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// PrepareResourceClaims writes each claim's CDI spec and returns its CDI
// devices, one per allocated device (device_state.go prepareDevices).
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := d.prepare(claim)
		if err != nil {
			err = fmt.Errorf("claim %s/%s (uid %s): %w", claim.Namespace, claim.Name, claim.UID, err)
			klog.FromContext(ctx).Error(err, "prepare")
		}
		out[claim.UID] = kubeletplugin.PrepareResult{Devices: devices, Err: err}
	}
	return out, nil
}

func (d *Driver) prepare(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	spec, devices, err := d.Spec(claim)
	if err != nil {
		return nil, err
	}
	if err := writeSpec(specPath(d.CDIRoot, claim.UID), spec); err != nil {
		return nil, err
	}
	return devices, nil
}

// Spec is the claim's CDI spec and the devices to hand kubelet. Results of
// other drivers or pools are not this driver's.
func (d *Driver) Spec(claim *resourceapi.ResourceClaim) (*cdiSpec, []kubeletplugin.Device, error) {
	if claim.Status.Allocation == nil {
		return nil, nil, errors.New("not allocated")
	}
	spec := &cdiSpec{Version: cdiVersion, Kind: cdiKind,
		ContainerEdits: cdiEdits{Env: []string{"NVIDIA_VISIBLE_DEVICES=void"}}}
	var devices []kubeletplugin.Device
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != driverName || r.Pool != d.Node {
			continue
		}
		g, ok := d.GPUs[r.Device]
		if !ok {
			return nil, nil, fmt.Errorf("request %s: device %s is not a GPU of pool %s", r.Request, r.Device, d.Node)
		}
		name := string(claim.UID) + "-" + r.Device
		spec.Devices = append(spec.Devices, cdiDevice{Name: name, ContainerEdits: cdiEdits{
			Env:         []string{fmt.Sprintf("GPU_DEVICE_%d=%s", g.Minor, g.UUID)},
			DeviceNodes: []cdiDeviceNode{{Path: g.nodePath(), HostPath: g.DevicePath}},
		}})
		devices = append(devices, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool,
			DeviceName: r.Device, CDIDeviceIDs: []string{CDIName(claim.UID, r.Device)}})
	}
	if len(devices) == 0 {
		return nil, nil, fmt.Errorf("no device of driver %s in pool %s", driverName, d.Node)
	}
	return spec, devices, nil
}

// writeSpec replaces the file at once: the runtime may read the directory
// at any time.
func writeSpec(path string, spec *cdiSpec) error {
	raw, err := yaml.Marshal(spec)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// UnprepareResourceClaims removes the claims' CDI specs; one already gone is
// not an error (kubelet may ask again).
func (d *Driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		err := os.Remove(specPath(d.CDIRoot, c.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		out[c.UID] = err
	}
	return out, nil
}

// HandleError logs a background error and stops on one the helper says is
// fatal.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.Fatal != nil {
		d.Fatal(fmt.Errorf("%s: %w", msg, err))
	}
}
