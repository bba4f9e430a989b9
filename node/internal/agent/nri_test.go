package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flextopo.dev/node/alloc"
	"flextopo.dev/node/internal/enforce"
)

type fakePods map[string]*corev1.Pod

func (f fakePods) Pod(_ context.Context, ns, name, uid string) (*corev1.Pod, error) {
	p, ok := f[ns+"/"+name]
	if !ok || string(p.UID) != uid {
		return nil, errorsNotFound(ns, name)
	}
	return p, nil
}

type notFound string

func (n notFound) Error() string { return string(n) }

func errorsNotFound(ns, name string) error { return notFound("pod " + ns + "/" + name + " not found") }

func testInventory() (*enforce.Inventory, error) {
	return &enforce.Inventory{
		GPUMinor:  map[string]int{"GPU-0": 0, "GPU-1": 1},
		CPUs:      map[int]bool{0: true, 1: true, 2: true, 3: true},
		NUMANodes: map[int]bool{0: true},
	}, nil
}

func gpuPod(ns, name, uid string, gpus int64, allocation string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Annotations: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI),
				"cpu":            resource.MustParse("2")}}}}},
	}
	if allocation != "" {
		p.Annotations[alloc.AllocationAnnotation] = allocation
	}
	return p
}

func sandbox(p *corev1.Pod) *api.PodSandbox {
	return &api.PodSandbox{Id: "sb-" + p.Name, Name: p.Name, Namespace: p.Namespace, Uid: string(p.UID), Annotations: p.Annotations}
}

// deviceContainer is a container as containerd hands it to NRI after the
// device plugin's envvar strategy gave it GPU-0.
func deviceContainer(id, sandboxID string) *api.Container {
	return &api.Container{Id: id, PodSandboxId: sandboxID, Name: "main", State: api.ContainerState_CONTAINER_CREATED,
		Env: []string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=GPU-0"},
		Linux: &api.LinuxContainer{
			Devices:   []*api.LinuxDevice{{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0}, {Path: "/dev/nvidiactl", Type: "c", Major: 195, Minor: 255}},
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-3"}},
		}}
}

const allocGPU1 = `{"version":1,"node":"n1","level":"numa","mode":"guaranteed","gpus":["GPU-1"],"gpuIndexes":[1],"mig":[],"cpuset":"2-3","numaNodes":[0],"memoryMiB":0}`

// runtime is NRI's runtime side, as containerd embeds it, listening on a
// socket the plugin connects to like an externally started plugin.
func startRuntime(t *testing.T, pods []*api.PodSandbox, ctrs []*api.Container) (*adaptation.Adaptation, string) {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "nri.sock")
	sync := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, pods, ctrs)
		return err
	}
	update := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	r, err := adaptation.New("test-runtime", "v1", sync, update,
		adaptation.WithSocketPath(sock), adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf")))
	if err != nil {
		t.Fatal(err)
	}
	if err = r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r, sock
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func connect(t *testing.T, p *Plugin, sock string) {
	t.Helper()
	s, err := stub.New(p, stub.WithSocketPath(sock), stub.WithPluginName("flextopo"), stub.WithPluginIdx("90"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); s.Stop() })
	if err = s.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitSynchronized waits until the plugin's Synchronize recorded uid's
// containers and the runtime has then registered the plugin. The runtime
// adds the plugin to the ones it calls only after Synchronize's reply, so a
// CreateContainer sent as soon as the record shows would find no plugin.
// Taking the runtime's sync lock for reading waits for that registration:
// the runtime holds it for writing from Synchronize until the plugin is
// added.
func waitSynchronized(t *testing.T, r *adaptation.Adaptation, rec *Record, uid string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rec.Containers(uid) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r.BlockPluginSync().Unblock()
}

func TestNRIPluginOverSocket(t *testing.T) {
	running := gpuPod("ns", "running", "uid-running", 1, allocGPU1)
	good := gpuPod("ns", "good", "uid-good", 1, allocGPU1)
	bad := gpuPod("ns", "bad", "uid-bad", 1, `{"version":1,"node":"n1"`)
	foreign := gpuPod("ns", "foreign", "uid-foreign", 1, strings.Replace(allocGPU1, "GPU-1", "GPU-7", 1))
	plain := gpuPod("ns", "plain", "uid-plain", 1, "")

	existing := deviceContainer("c-running", "sb-running")
	existing.Env = []string{"NVIDIA_VISIBLE_DEVICES=GPU-1"}
	existing.Linux.Devices = []*api.LinuxDevice{{Path: "/dev/nvidia1", Type: "c", Major: 195, Minor: 1}}
	existing.Linux.Resources.Cpu.Cpus = "2,3"
	r, sock := startRuntime(t, []*api.PodSandbox{sandbox(running)}, []*api.Container{existing})

	rec := NewRecord()
	p := &Plugin{Node: "n1", Resources: enforce.DefaultResources, Inventory: testInventory, Record: rec,
		Pods: fakePods{"ns/running": running, "ns/good": good, "ns/bad": bad, "ns/foreign": foreign, "ns/plain": plain},
		Log:  quietLog(), Metrics: NewMetrics(nil)}
	connect(t, p, sock)

	// Synchronize: the running container's holding is read from its spec.
	waitSynchronized(t, r, rec, "uid-running")
	if h := rec.Containers("uid-running")["main"]; !slices.Equal(h.GPUs, []string{"GPU-1"}) || h.CPUSet != "2-3" {
		t.Fatalf("synchronized holding %+v, want GPU-1 and cpuset 2-3", h)
	}

	ctx := context.Background()
	t.Run("allocation applied", func(t *testing.T) {
		resp, err := r.CreateContainer(ctx, &adaptation.CreateContainerRequest{Pod: sandbox(good), Container: deviceContainer("c-good", "sb-good")})
		if err != nil {
			t.Fatal(err)
		}
		adj := resp.GetAdjust()
		if got := adj.GetLinux().GetResources().GetCpu().GetCpus(); got != "2-3" {
			t.Errorf("cpuset.cpus %q, want 2-3", got)
		}
		if got := adj.GetLinux().GetResources().GetCpu().GetMems(); got != "0" {
			t.Errorf("cpuset.mems %q, want 0", got)
		}
		var added, removed []string
		for _, d := range adj.GetLinux().GetDevices() {
			if strings.HasPrefix(d.Path, "-") {
				removed = append(removed, d.Path)
			} else {
				added = append(added, d.Path)
			}
		}
		if !slices.Contains(added, "/dev/nvidia1") || slices.Contains(added, "/dev/nvidia0") {
			t.Errorf("devices: added %v removed %v; want /dev/nvidia1 in, /dev/nvidia0 not", added, removed)
		}
		denied := false
		for _, r := range adj.GetLinux().GetResources().GetDevices() {
			denied = denied || (!r.Allow && r.Major.GetValue() == 195 && r.Minor.GetValue() == 0 && r.Access == "rwm")
		}
		if !denied {
			t.Errorf("device cgroup rules %v: want c 195:0 denied", adj.GetLinux().GetResources().GetDevices())
		}
		env := map[string]string{}
		for _, kv := range adj.GetEnv() {
			env[kv.Key] = kv.Value
		}
		if env["NVIDIA_VISIBLE_DEVICES"] != "GPU-1" {
			t.Errorf("env %v, want NVIDIA_VISIBLE_DEVICES=GPU-1", env)
		}
		if h := rec.Containers("uid-good")["main"]; !slices.Equal(h.GPUs, []string{"GPU-1"}) || h.CPUSet != "2-3" {
			t.Errorf("recorded %+v", h)
		}
	})
	t.Run("malformed allocation refused with the fault", func(t *testing.T) {
		_, err := r.CreateContainer(ctx, &adaptation.CreateContainerRequest{Pod: sandbox(bad), Container: deviceContainer("c-bad", "sb-bad")})
		if err == nil || !strings.Contains(err.Error(), "annotation flextopo.io/allocation: allocation: not a JSON object") ||
			!strings.Contains(err.Error(), "pod ns/bad container main") {
			t.Fatalf("error %v, want the malformed annotation named", err)
		}
	})
	t.Run("unknown GPU refused with the fault", func(t *testing.T) {
		_, err := r.CreateContainer(ctx, &adaptation.CreateContainerRequest{Pod: sandbox(foreign), Container: deviceContainer("c-foreign", "sb-foreign")})
		if err == nil || !strings.Contains(err.Error(), "allocation names GPU GPU-7, which this node does not have") {
			t.Fatalf("error %v, want the unknown GPU named", err)
		}
	})
	t.Run("pod without allocation left alone", func(t *testing.T) {
		resp, err := r.CreateContainer(ctx, &adaptation.CreateContainerRequest{Pod: sandbox(plain), Container: deviceContainer("c-plain", "sb-plain")})
		if err != nil {
			t.Fatal(err)
		}
		if adj := resp.GetAdjust(); adj.GetLinux().GetResources().GetCpu().GetCpus() != "" || len(adj.GetEnv()) != 0 || len(adj.GetLinux().GetDevices()) != 0 {
			t.Errorf("adjusted a pod without allocation: %+v", adj)
		}
		if rec.Containers("uid-plain") != nil {
			t.Error("recorded a pod without allocation")
		}
	})
	t.Run("kubelet's cpuset update is overridden", func(t *testing.T) {
		resp, err := r.UpdateContainer(ctx, &adaptation.UpdateContainerRequest{Pod: sandbox(good), Container: deviceContainer("c-good", "sb-good"),
			LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-3"}}})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, u := range resp.GetUpdate() {
			found = found || (u.ContainerId == "c-good" && u.GetLinux().GetResources().GetCpu().GetCpus() == "2-3")
		}
		if !found {
			t.Errorf("updates %v: want c-good kept on 2-3", resp.GetUpdate())
		}
	})
	t.Run("removal forgets", func(t *testing.T) {
		if err := r.RemovePodSandbox(ctx, &adaptation.RemovePodSandboxRequest{Pod: sandbox(good)}); err != nil {
			t.Fatal(err)
		}
		if rec.Containers("uid-good") != nil {
			t.Error("pod still recorded after removal")
		}
	})
	if os.Getenv("NRI_TEST_VERBOSE") != "" {
		t.Logf("%+v", p.Metrics)
	}
}
