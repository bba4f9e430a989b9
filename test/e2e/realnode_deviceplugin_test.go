package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// standInDevice is one GPU the stand-in device plugin advertises: its UUID
// (the device ID kubelet sees) and the stand-in device node for it.
type standInDevice struct {
	UUID          string
	HostPath      string // e.g. <work>/dev/nvidia0 (char 195:N)
	ContainerPath string // e.g. /dev/nvidia0
}

// standInDevicePlugin plays the NVIDIA device plugin in its default
// configuration (device list strategy "envvar"): it advertises nvidia.com/gpu
// with the GPU UUIDs as device IDs and answers Allocate with
// NVIDIA_VISIBLE_DEVICES=<UUIDs>, plus the device nodes (as the real plugin
// does with passDeviceSpecs) so the container gets /dev/nvidiaN.
type standInDevicePlugin struct {
	pluginapi.UnimplementedDevicePluginServer

	resource string
	devices  []standInDevice
	// cdiKind, when set, makes Allocate answer with CDI device names
	// (<cdiKind>=<UUID>, the device plugin's cdi-cri strategy) instead of
	// the environment variable and device specs (envvar strategy).
	cdiKind  string
	dir      string // kubelet's device-plugins directory, as seen here
	sockName string // our socket in dir

	srv  *grpc.Server
	stop chan struct{}

	mu          sync.Mutex
	allocations [][]string // device IDs of every Allocate, for tests
}

func newStandInDevicePlugin(dir, resource string, devices []standInDevice) *standInDevicePlugin {
	return &standInDevicePlugin{
		resource: resource,
		devices:  devices,
		dir:      dir,
		sockName: "flextopo-e2e-nvidia.sock",
		stop:     make(chan struct{}),
	}
}

// start serves the plugin API on dir/sockName and registers with kubelet
// (dir/kubelet.sock). kubelet's device manager empties the directory when
// it starts, so this waits for kubelet.sock first. (The test does not
// restart kubelet, so there is no re-registration.)
func (p *standInDevicePlugin) start(ctx context.Context) error {
	kubeletSock := filepath.Join(p.dir, "kubelet.sock")
	if err := waitForSocket(ctx, kubeletSock); err != nil {
		return fmt.Errorf("device plugin: kubelet's registration socket: %w", err)
	}
	if err := p.serveAndRegister(ctx, kubeletSock); err != nil {
		return err
	}
	return nil
}

func (p *standInDevicePlugin) serveAndRegister(ctx context.Context, kubeletSock string) error {
	sock := filepath.Join(p.dir, p.sockName)
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("device plugin: listen: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	p.mu.Lock()
	old := p.srv
	p.srv = srv
	p.mu.Unlock()
	if old != nil {
		old.Stop()
	}

	// A short reconnect backoff: kubelet's device manager may replace
	// kubelet.sock after waitForSocket saw it, and gRPC's default backoff
	// grows to minutes between attempts, each Register failing fast.
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	var last error
	for {
		cx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, last = pluginapi.NewRegistrationClient(conn).Register(cx, &pluginapi.RegisterRequest{
			Version:      pluginapi.Version,
			Endpoint:     p.sockName,
			ResourceName: p.resource,
			Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
		})
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("device plugin: register with kubelet: %w (last error: %v)", ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (p *standInDevicePlugin) shutdown() {
	select {
	case <-p.stop:
		return
	default:
		close(p.stop)
	}
	p.mu.Lock()
	srv := p.srv
	p.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	_ = os.Remove(filepath.Join(p.dir, p.sockName))
}

func (p *standInDevicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

func (p *standInDevicePlugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	resp := &pluginapi.ListAndWatchResponse{}
	for _, d := range p.devices {
		resp.Devices = append(resp.Devices, &pluginapi.Device{
			ID:       d.UUID,
			Health:   pluginapi.Healthy,
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 0}}},
		})
	}
	if err := stream.Send(resp); err != nil {
		return err
	}
	select {
	case <-p.stop:
	case <-stream.Context().Done():
	}
	return nil
}

func (p *standInDevicePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	byID := map[string]standInDevice{}
	for _, d := range p.devices {
		byID[d.UUID] = d
	}
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		ids := append([]string(nil), cr.DevicesIds...)
		p.mu.Lock()
		p.allocations = append(p.allocations, ids)
		p.mu.Unlock()
		if p.cdiKind != "" {
			car := &pluginapi.ContainerAllocateResponse{}
			for _, id := range ids {
				if _, ok := byID[id]; !ok {
					return nil, fmt.Errorf("unknown device %q", id)
				}
				car.CdiDevices = append(car.CdiDevices, &pluginapi.CDIDevice{Name: p.cdiKind + "=" + id})
			}
			resp.ContainerResponses = append(resp.ContainerResponses, car)
			continue
		}
		car := &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(ids, ",")},
		}
		sorted := append([]string(nil), ids...)
		sort.Strings(sorted)
		for _, id := range sorted {
			d, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("unknown device %q", id)
			}
			car.Devices = append(car.Devices, &pluginapi.DeviceSpec{
				ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: "rw",
			})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, car)
	}
	return resp, nil
}

// GetPreferredAllocation prefers the lowest device IDs (after those kubelet
// must include), so kubelet's choice is known in advance: the scenario
// needs it to differ from flextopo's.
func (p *standInDevicePlugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		pick := append([]string(nil), cr.MustIncludeDeviceIDs...)
		chosen := map[string]bool{}
		for _, id := range pick {
			chosen[id] = true
		}
		avail := append([]string(nil), cr.AvailableDeviceIDs...)
		sort.Strings(avail)
		for _, id := range avail {
			if len(pick) >= int(cr.AllocationSize) {
				break
			}
			if !chosen[id] {
				pick = append(pick, id)
				chosen[id] = true
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: pick})
	}
	return resp, nil
}

func (p *standInDevicePlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// waitForSocket waits until path exists and accepts a connection.
func waitForSocket(ctx context.Context, path string) error {
	for {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
