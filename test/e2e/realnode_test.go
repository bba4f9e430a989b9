package e2e

// A real node: kubelet (from the Kubernetes modules k8s-testenv links),
// containerd 2.x with NRI (built by scripts/e2e.sh from its Go module), runc
// from Debian and an image built here from Debian's static busybox. A
// stand-in NVIDIA device plugin advertises three GPUs whose device nodes are
// character devices 195:N made here (no driver answers them, so opening one
// the container may use fails with ENXIO and one the device cgroup denies
// with EPERM). flextopo-node runs in enforce mode against containerd's NRI
// socket and kubelet's PodResources socket and publishes the node's topology.
//
// The node's topology puts GPU 2 on NUMA node 0 with the machine's CPUs and
// GPUs 0 and 1 on NUMA node 1, whose CPUs are reserved. The device plugin
// prefers the lowest free GPU, as kubelet's own choice would be. So:
//   - a pinned 1-CPU, 1-GPU pod in numa/guaranteed mode gets GPU 2 from
//     flextopo while kubelet's device manager picks GPU 0: the container
//     must run with GPU 2 and the allocation's cpuset, GPU 0 denied;
//   - a GPU pod bound without flextopo gets GPU 1 from kubelet; the agent
//     reports it and the extender counts it as drift;
//   - a second flextopo GPU pod must then get GPU 0, the only GPU no
//     container really holds, although kubelet hands it GPU 2;
//   - a pod whose allocation names a GPU the node lacks is refused at
//     container creation with that reason in its events.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"sigs.k8s.io/yaml"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const (
	realNodeImage = "flextopo.local/busybox:1"
	realNodeTaint = "flextopo.io/real-node"
	nvidiaMajor   = 195 // /dev/nvidiaN (NVIDIA driver README, "Device nodes")
	annObserved   = "flextopo.io/observed"
)

// Device plugin strategies the scenario runs with (the NVIDIA device
// plugin's deviceListStrategy): envvar hands kubelet NVIDIA_VISIBLE_DEVICES
// and device specs; cdi-cri hands it CDI device names, which containerd
// resolves from a CDI spec into device nodes before NRI sees the container.
const (
	strategyEnvvar = "envvar"
	strategyCDI    = "cdi-cri"
	cdiKind        = "nvidia.com/gpu"
	// strategyDRA runs no device plugin: the DRA kubelet plugin stand-in
	// (DRA_PLUGIN, draplugin/) publishes the GPUs as NVIDIA's DRA driver does
	// and writes a CDI spec per prepared claim, which containerd resolves.
	strategyDRA = "dra"
)

// realNode is the running node of one test.
type realNode struct {
	t          *testing.T
	c          *harness.Cluster
	name       string
	strategy   string
	dir        string
	outDir     string // the containers' /out (hostPath)
	ctrdSock   string
	ctr        string // the ctr binary
	agentURL   string
	plugin     *standInDevicePlugin
	gpuUUIDs   []string
	kubeletLog string
	agentLog   string
}

// realNodeTools finds what the scenario needs, or says what is missing.
func realNodeTools(strategy string) (tools map[string]string, missing []string) {
	tools = map[string]string{}
	need := func(key, path string) {
		if harness.IsExecutable(path) {
			tools[key] = path
		} else {
			missing = append(missing, fmt.Sprintf("%s (%s)", key, path))
		}
	}
	dir := os.Getenv("CONTAINERD_DIR")
	need("containerd", filepath.Join(dir, "containerd"))
	need("containerd-shim-runc-v2", filepath.Join(dir, "containerd-shim-runc-v2"))
	need("ctr", filepath.Join(dir, "ctr"))
	need("flextopo-node", os.Getenv("FLEXTOPO_NODE"))
	need("kubelet (k8s-testenv)", os.Getenv("K8S_TESTENV"))
	if strategy == strategyDRA {
		need("draplugin", os.Getenv("DRA_PLUGIN"))
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		runc = "/usr/sbin/runc"
	}
	need("runc", runc)
	need("busybox", "/bin/busybox")
	if os.Geteuid() != 0 {
		missing = append(missing, "root (kubelet and containerd manage cgroups and mounts)")
	}
	return tools, missing
}

// requireRealNode starts the node with the given device plugin strategy, or
// skips (fails under CI) when a tool is missing.
func requireRealNode(t *testing.T, c *harness.Cluster, name, strategy string) *realNode {
	t.Helper()
	tools, missing := realNodeTools(strategy)
	if len(missing) > 0 {
		msg := "real node: missing " + strings.Join(missing, ", ") + " (scripts/install-deps.sh and scripts/e2e.sh provide them)"
		if harness.IsCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir, err := c.Dir("realnode-" + strategy)
	if err != nil {
		t.Fatal(err)
	}
	n := &realNode{t: t, c: c, name: name, strategy: strategy, dir: dir, outDir: filepath.Join(dir, "out"), ctr: tools["ctr"]}
	for _, d := range []string{n.outDir, filepath.Join(dir, "dev"), filepath.Join(dir, "kubelet")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.standInGPUs(3)
	n.startContainerd(tools)
	n.startKubelet(tools["kubelet (k8s-testenv)"])
	if strategy == strategyDRA {
		n.startDRAPlugin(tools["draplugin"])
	} else {
		n.startDevicePlugin()
	}
	n.startAgent(tools["flextopo-node"])
	n.waitReady()
	return n
}

func (n *realNode) startDevicePlugin() {
	// kubelet's device manager serves its registration socket at a fixed
	// path, whatever --root-dir says (k8s.io/kubelet deviceplugin
	// v1beta1.DevicePluginPath).
	n.plugin = newStandInDevicePlugin(pluginapi.DevicePluginPath, flextopo.ResGPU, n.devices())
	if n.strategy == strategyCDI {
		n.plugin.cdiKind = cdiKind
	}
	cx := harness.Ctx(n.t, 60*time.Second)
	if err := n.plugin.start(cx); err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(n.plugin.shutdown)
}

// standInGPUs makes /dev/nvidiaN stand-ins and the driver's procfs files the
// agent reads (GPU UUID, Device Minor).
func (n *realNode) standInGPUs(count int) {
	for i := 0; i < count; i++ {
		uuid := fmt.Sprintf("GPU-e2e-%d", i)
		n.gpuUUIDs = append(n.gpuUUIDs, uuid)
		dev := filepath.Join(n.dir, "dev", fmt.Sprintf("nvidia%d", i))
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(mkdev(nvidiaMajor, uint32(i)))); err != nil && !os.IsExist(err) {
			n.t.Fatalf("mknod %s: %v", dev, err)
		}
		info := filepath.Join(n.dir, "nvidia", "gpus", fmt.Sprintf("0000:%02x:00.0", i+1), "information")
		if err := os.MkdirAll(filepath.Dir(info), 0o755); err != nil {
			n.t.Fatal(err)
		}
		body := fmt.Sprintf("Model: \t\t stand-in\nGPU UUID: \t %s\nDevice Minor: \t %d\n", uuid, i)
		if err := os.WriteFile(info, []byte(body), 0o644); err != nil {
			n.t.Fatal(err)
		}
	}
}

func mkdev(major, minor uint32) uint64 {
	return uint64(minor&0xff) | uint64(major&0xfff)<<8 | uint64(minor&^0xff)<<12 | uint64(major&^0xfff)<<32
}

func (n *realNode) devices() []standInDevice {
	var ds []standInDevice
	for i, u := range n.gpuUUIDs {
		ds = append(ds, standInDevice{
			UUID:          u,
			HostPath:      filepath.Join(n.dir, "dev", fmt.Sprintf("nvidia%d", i)),
			ContainerPath: fmt.Sprintf("/dev/nvidia%d", i),
		})
	}
	return ds
}

// onlineCPUs is the machine's online CPU list and its highest CPU.
func onlineCPUs(t *testing.T) (string, int) {
	raw, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	list := strings.TrimSpace(string(raw))
	cpus, err := flextopo.ParseCPUList(list)
	if err != nil || len(cpus) == 0 {
		t.Fatalf("/sys/devices/system/cpu/online %q: %v", list, err)
	}
	last := 0
	for c := range cpus {
		last = max(last, c)
	}
	return list, last
}

// standInNUMA is the NUMA node of stand-in GPU i: GPU 2 on NUMA node 0,
// with the machine's CPUs; GPUs 0 and 1 on NUMA node 1.
func standInNUMA(i int) int {
	if i == 2 {
		return 0
	}
	return 1
}

// topology is what the agent's discovery command prints for this node:
// NUMA node 0 = the machine's CPUs + GPU 2, NUMA node 1 = two CPUs past the
// machine's (reserved, so nothing lands there) + GPUs 0 and 1.
func (n *realNode) topology() []byte {
	list, last := onlineCPUs(n.t)
	extra := fmt.Sprintf("%d-%d", last+1, last+2)
	gpusOn := func(numa int) []interface{} {
		var out []interface{}
		for i, u := range n.gpuUUIDs {
			if standInNUMA(i) == numa {
				out = append(out, map[string]interface{}{"index": i, "uuid": u, "model": testGPUModel,
					"memoryMiB": testGPUMemMiB, "nvlinks": []interface{}{}})
			}
		}
		return out
	}
	topo := map[string]interface{}{
		"version": 1,
		"sockets": []interface{}{map[string]interface{}{"id": 0, "numaNodes": []interface{}{
			map[string]interface{}{"id": 0, "cpus": list, "memoryMiB": 4096, "pcieSwitches": []interface{}{},
				"gpus": gpusOn(0)},
			map[string]interface{}{"id": 1, "cpus": extra, "memoryMiB": 4096, "pcieSwitches": []interface{}{},
				"gpus": gpusOn(1)},
		}}},
		"reserved": map[string]interface{}{"cpus": extra},
	}
	b, err := json.Marshal(topo)
	if err != nil {
		n.t.Fatal(err)
	}
	return b
}

func (n *realNode) startContainerd(tools map[string]string) {
	t := n.t
	d := filepath.Join(n.dir, "containerd")
	n.ctrdSock = filepath.Join(d, "containerd.sock")
	for _, sub := range []string{"root", "state", "nri/conf.d", "runc", "cni/net.d"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The shim is found on PATH, next to containerd.
	path := filepath.Dir(tools["containerd"]) + string(os.PathListSeparator) + os.Getenv("PATH")
	if err := os.Setenv("PATH", path); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  disable_connections = false
  socket_path = %[5]q
  plugin_path = %[6]q
  plugin_config_path = %[7]q
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[8]q
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = %[13]v
  cdi_spec_dirs = [%[14]q]
  # The CI machine's root lacks CAP_SYS_RESOURCE: kubelet's oom_score_adj
  # of -998 for sandboxes would fail runc's init.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %[9]q
        Root = %[10]q
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[11]q]
    conf_dir = %[12]q
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(d, "root"), filepath.Join(d, "state"), n.ctrdSock, n.ctrdSock+".ttrpc",
		n.nriSocket(), filepath.Join(d, "nri/plugins"), filepath.Join(d, "nri/conf.d"), realNodeImage,
		tools["runc"], filepath.Join(d, "runc"), filepath.Join(d, "cni/bin"), filepath.Join(d, "cni/net.d"),
		n.strategy != strategyEnvvar, n.cdiDir())
	cfgPath := filepath.Join(d, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	n.writeCDISpec()
	p := harness.TestProcess(t, "containerd", n.dir, tools["containerd"], "--config", cfgPath)
	// Registered after the process, so it runs before containerd stops:
	// the containers and their shims go first, then the mounts.
	t.Cleanup(n.cleanupRuntime)
	cx := harness.Ctx(t, 30*time.Second)
	if err := waitForSocket(cx, n.ctrdSock); err != nil {
		t.Fatalf("containerd: %v\n%s", err, harness.TailFile(p.LogPath, 40))
	}

	archive := filepath.Join(n.dir, "busybox.tar")
	if err := (busyboxImage{Ref: realNodeImage, Busybox: "/bin/busybox"}).writeArchive(archive); err != nil {
		t.Fatal(err)
	}
	if out, err := n.ctrCmd("images", "import", "--local", archive).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
}

func (n *realNode) cdiDir() string { return filepath.Join(n.dir, "cdi") }

// writeCDISpec writes the stand-in GPUs as a CDI spec, the shape
// nvidia-ctk cdi generate gives (a device per GPU named by UUID, its device
// node; NVIDIA_VISIBLE_DEVICES=void for every container, so that a legacy
// runtime hook injects nothing more).
func (n *realNode) writeCDISpec() {
	var devs []interface{}
	for i, u := range n.gpuUUIDs {
		devs = append(devs, map[string]interface{}{
			"name": u,
			"containerEdits": map[string]interface{}{"deviceNodes": []interface{}{map[string]interface{}{
				"path": fmt.Sprintf("/dev/nvidia%d", i), "hostPath": filepath.Join(n.dir, "dev", fmt.Sprintf("nvidia%d", i)),
			}}},
		})
	}
	spec, err := json.Marshal(map[string]interface{}{
		"cdiVersion":     "0.5.0",
		"kind":           cdiKind,
		"devices":        devs,
		"containerEdits": map[string]interface{}{"env": []string{"NVIDIA_VISIBLE_DEVICES=void"}},
	})
	if err != nil {
		n.t.Fatal(err)
	}
	if err := os.MkdirAll(n.cdiDir(), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.cdiDir(), "nvidia.json"), spec, 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *realNode) nriSocket() string { return filepath.Join(n.dir, "containerd", "nri", "nri.sock") }

func (n *realNode) ctrCmd(args ...string) *exec.Cmd {
	return exec.Command(n.ctr, append([]string{"--address", n.ctrdSock, "--namespace", "k8s.io"}, args...)...)
}

// cleanupRuntime kills what kubelet left running (the containers outlive
// kubelet and containerd: their shims are daemons), then unmounts what the
// runtime mounted under the work directory.
func (n *realNode) cleanupRuntime() {
	out, err := n.ctrCmd("tasks", "list", "--quiet").Output()
	if err == nil {
		for _, id := range strings.Fields(string(out)) {
			_ = n.ctrCmd("tasks", "kill", "--signal", "SIGKILL", id).Run()
		}
		time.Sleep(500 * time.Millisecond)
		for _, id := range strings.Fields(string(out)) {
			_ = n.ctrCmd("tasks", "delete", "--force", id).Run()
		}
	}
	// Shims of this containerd that are still there.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(raw), "containerd-shim-runc-v2") || !strings.Contains(string(raw), n.ctrdSock) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	n.unmountUnder(n.dir)
}

// unmountUnder detaches every mount below dir, deepest first.
func (n *realNode) unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

func (n *realNode) startKubelet(testenv string) {
	t := n.t
	kd := filepath.Join(n.dir, "kubelet")
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	healthz, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]interface{}{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		"authentication": map[string]interface{}{
			"anonymous": map[string]interface{}{"enabled": false},
			"webhook":   map[string]interface{}{"enabled": false},
		},
		"authorization":            map[string]interface{}{"mode": "AlwaysAllow"},
		"address":                  "127.0.0.1",
		"port":                     port,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              healthz,
		"containerRuntimeEndpoint": "unix://" + n.ctrdSock,
		"cgroupDriver":             "cgroupfs",
		// The CPU manager's default: the agent, not kubelet, pins CPUs.
		"cpuManagerPolicy": "none",
		// The CI machines still run cgroup v1 (kubelet >= 1.35 refuses it
		// unless told otherwise) and may have swap.
		"failCgroupV1": false,
		"failSwapOn":   false,
		"podLogsDir":   filepath.Join(n.dir, "pod-logs"),
		// No eviction and no image garbage collection on a busy CI disk.
		"evictionHard": map[string]string{"memory.available": "1Mi", "nodefs.available": "1Mi",
			"imagefs.available": "1Mi", "nodefs.inodesFree": "1%", "imagefs.inodesFree": "1%"},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"serializeImagePulls":         false,
		"registerWithTaints": []interface{}{map[string]interface{}{
			"key": realNodeTaint, "value": "true", "effect": "NoSchedule",
		}},
		"resolvConf": "",
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(kd, "config.yaml")
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// Every kubelet of this machine keeps its device manager's checkpoint
	// in the one device-plugins directory (pluginapi.DevicePluginPath).
	// A checkpoint an earlier node left counts its pods' devices as taken
	// until the new kubelet's pod sources are ready, and a pod admitted
	// before that is refused ("Available: 0").
	if err := os.Remove(filepath.Join(pluginapi.DevicePluginPath, "kubelet_internal_checkpoint")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	p := harness.TestProcess(t, "kubelet", n.dir, testenv, "kubelet",
		"--config", cfgPath,
		"--kubeconfig", n.c.Kubeconfig,
		"--root-dir", kd,
		"--cert-dir", filepath.Join(kd, "pki"),
		"--hostname-override", n.name,
		"--node-labels", labelTest+"="+n.name,
		"--v", "2")
	n.kubeletLog = p.LogPath
}

func (n *realNode) startAgent(bin string) {
	t := n.t
	topo := filepath.Join(n.dir, "topology.json")
	if err := os.WriteFile(topo, n.topology(), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	n.agentURL = "http://" + harness.HostPort(port)
	p := harness.TestProcess(t, "flextopo-node", n.dir, bin,
		"--node-name", n.name,
		"--mode", "enforce",
		"--kubeconfig", n.c.Kubeconfig,
		"--listen", harness.HostPort(port),
		"--nri-socket", n.nriSocket(),
		"--pod-resources-socket", filepath.Join(n.dir, "kubelet", "pod-resources", "kubelet.sock"),
		"--discover-command", "cat "+topo,
		"--nvidia-proc-root", filepath.Join(n.dir, "nvidia"),
		"--observe-interval", "1s",
		"--log-level", "debug")
	n.agentLog = p.LogPath
}

// waitReady waits for the Node (registered, 3 GPUs allocatable or, with
// DRA, published in its ResourceSlice; the agent's topology) and the agent's
// /readyz.
func (n *realNode) waitReady() {
	t := n.t
	start := time.Now()
	deadline := start.Add(90 * time.Second)
	last := ""
	for {
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		node, err := n.c.Client.CoreV1().Nodes().Get(cx, n.name, metav1.GetOptions{})
		cancel()
		ready := false
		if err == nil {
			gpus := node.Status.Allocatable[flextopo.ResGPU]
			cond := ""
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					cond = string(c.Status) + " " + c.Reason + ": " + c.Message
				}
			}
			_, topo := node.Annotations[flextopo.AnnTopology]
			published, what := gpus.Value(), fmt.Sprintf("allocatable %s=%s", flextopo.ResGPU, gpus.String())
			if n.strategy == strategyDRA {
				published, what = n.publishedDRADevices()
			}
			last = fmt.Sprintf("Ready=%s; %s; topology annotation %v", cond, what, topo)
			// Ready stays False (no CNI plugin: "network not ready"); kubelet
			// still runs host-network pods, and nothing taints the node for
			// it here (no node lifecycle controller runs).
			ready = published == int64(len(n.gpuUUIDs)) && topo
		} else {
			last = err.Error()
		}
		if ready {
			if code, body := httpGet(n.agentURL + "/readyz"); code == 200 {
				break
			} else {
				last = fmt.Sprintf("agent /readyz: HTTP %d %s", code, body)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not ready after 90s: %s\nkubelet log:\n%s\nagent log:\n%s", n.name, last,
				harness.TailFile(n.kubeletLog, 60), harness.TailFile(n.agentLog, 30))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("node %s ready in %s: kubelet, containerd with NRI, stand-in %s plugin, flextopo-node", n.name,
		time.Since(start).Round(100*time.Millisecond),
		map[bool]string{true: "DRA kubelet", false: "device"}[n.strategy == strategyDRA])
}

func httpGet(url string) (int, string) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, string(b)
}

// probeScript records, in /out/<name>, what the container really has: its
// cgroup cpuset, the CPUs it may run on, NVIDIA_VISIBLE_DEVICES, the
// GPU_DEVICE_<minor> variables of the DRA plugin stand-in's CDI devices,
// every /dev/nvidia* and, for each /dev/nvidiaN, what opening it gives.
const probeScript = `set -u
o=/out/$1
{
  echo "cpuset.cpus=$(cat /sys/fs/cgroup/cpuset/cpuset.cpus 2>/dev/null || cat /sys/fs/cgroup/cpuset.cpus.effective)"
  echo "cpuset.mems=$(cat /sys/fs/cgroup/cpuset/cpuset.mems 2>/dev/null || cat /sys/fs/cgroup/cpuset.mems.effective)"
  echo "allowed=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
  echo "visible=${NVIDIA_VISIBLE_DEVICES:-}"
  echo "gpuenv=$(env | grep '^GPU_DEVICE_' | sort | tr '\n' ' ')"
  echo "nodes=$(ls /dev | grep '^nvidia' | tr '\n' ' ')"
  for d in /dev/nvidia[0-9]*; do
    [ -e "$d" ] || continue
    if head -c1 "$d" >/dev/null 2>/tmp/err; then r=readable; else r=$(cat /tmp/err); fi
    echo "open $d: $r"
  done
} > "$o.tmp" && mv "$o.tmp" "$o"
exec sleep 3600
`

// realPod is a pod for the real node: host network (no CNI), the local
// image, the node's taint tolerated, /out mounted.
func (n *realNode) realPod(s *scenario, ps podSpec) *corev1.Pod {
	p := s.podObject(ps)
	p.Spec.HostNetwork = true
	p.Spec.NodeSelector = map[string]string{labelTest: n.name}
	p.Spec.Tolerations = []corev1.Toleration{{Key: realNodeTaint, Operator: corev1.TolerationOpExists}}
	hostDir := corev1.HostPathDirectory
	p.Spec.Volumes = []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: n.outDir, Type: &hostDir}}}}
	ctr := &p.Spec.Containers[0]
	ctr.Image = realNodeImage
	ctr.ImagePullPolicy = corev1.PullNever
	ctr.Command = []string{"/bin/sh", "-c", probeScript, "probe", ps.name}
	ctr.VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	return p
}

func (n *realNode) create(s *scenario, p *corev1.Pod) {
	n.t.Helper()
	cx := harness.Ctx(n.t, 30*time.Second)
	if _, err := n.c.Client.CoreV1().Pods(s.ns).Create(cx, p, metav1.CreateOptions{}); err != nil {
		n.t.Fatalf("create pod %s: %v", p.Name, err)
	}
}

// probe waits for the container's record and parses it.
type probeResult struct {
	cpus, mems, allowed, visible string
	gpuEnv                       []string          // GPU_DEVICE_<minor>=<uuid>, sorted
	nodes                        []string          // the names of /dev/nvidia*
	open                         map[string]string // /dev/nvidiaN -> "readable" or the error
	raw                          string
}

func (n *realNode) waitProbe(s *scenario, name string) *probeResult {
	n.t.Helper()
	path := filepath.Join(n.outDir, name)
	start := time.Now()
	deadline := start.Add(90 * time.Second)
	for {
		raw, err := os.ReadFile(path)
		if err == nil {
			r := &probeResult{open: map[string]string{}, raw: string(raw)}
			for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
				switch k, v, _ := strings.Cut(line, "="); {
				case k == "cpuset.cpus":
					r.cpus = v
				case k == "cpuset.mems":
					r.mems = v
				case k == "allowed":
					r.allowed = v
				case k == "visible":
					r.visible = v
				case k == "gpuenv":
					r.gpuEnv = strings.Fields(v)
				case k == "nodes":
					r.nodes = strings.Fields(v)
				case strings.HasPrefix(line, "open "):
					dev, what, _ := strings.Cut(strings.TrimPrefix(line, "open "), ": ")
					r.open[dev] = what
				}
			}
			n.t.Logf("pod %s, in its container (its record after %s):\n%s", name,
				time.Since(start).Round(100*time.Millisecond), strings.TrimSpace(string(raw)))
			return r
		}
		if time.Now().After(deadline) {
			cx := harness.Ctx(n.t, 10*time.Second)
			n.t.Fatalf("pod %s: no record from its container after 90s; events:\n%s\nagent log:\n%s", name,
				s.events(cx, name), harness.TailFile(n.agentLog, 40))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// deviceState classifies what opening a stand-in device node gave.
func deviceState(what string) string {
	switch {
	case strings.Contains(what, "Operation not permitted"):
		return "denied" // the device cgroup
	case strings.Contains(what, "No such device or address"), what == "readable":
		return "allowed" // the cgroup let it through; no driver behind it
	}
	return what
}

// Observed is the flextopo.io/observed annotation (api/observed.schema.json).
type Observed struct {
	Version  int                          `json:"version"`
	Node     string                       `json:"node"`
	Source   string                       `json:"source"`
	GPUs     []string                     `json:"gpus"`
	MIG      []string                     `json:"mig"`
	Replicas []flextopo.ReplicaAllocation `json:"replicas"`
	CPUSet   string                       `json:"cpuset"`
}

// waitObserved waits until the agent has written the pod's observed
// annotation and ok accepts it.
func (n *realNode) waitObserved(s *scenario, name string, ok func(*Observed) bool) *Observed {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last := "(none)"
	for {
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pod, err := n.c.Client.CoreV1().Pods(s.ns).Get(cx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			n.t.Fatal(err)
		}
		if raw := pod.Annotations[annObserved]; raw != "" {
			last = raw
			var o Observed
			if err := json.Unmarshal([]byte(raw), &o); err != nil {
				n.t.Fatalf("pod %s: %s is not JSON: %v: %s", name, annObserved, err, raw)
			}
			if ok(&o) {
				n.t.Logf("pod %s: %s %s", name, annObserved, raw)
				return &o
			}
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("pod %s: %s after 30s: %s", name, annObserved, last)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// kubeletChoice is what kubelet's device manager asked the device plugin to
// allocate for the n-th Allocate call.
func (n *realNode) allocateCalls() [][]string {
	n.plugin.mu.Lock()
	defer n.plugin.mu.Unlock()
	return append([][]string(nil), n.plugin.allocations...)
}

func minorOf(uuid string) string {
	return "/dev/nvidia" + strings.TrimPrefix(uuid, "GPU-e2e-")
}

func TestRealNodeContainersGetTheAllocation(t *testing.T) {
	c := requireExtender(t)
	for _, strategy := range []string{strategyEnvvar, strategyCDI} {
		t.Run(strategy, func(t *testing.T) { realNodeScenario(t, c, strategy) })
	}
}

func realNodeScenario(t *testing.T, c *harness.Cluster, strategy string) {
	s := newScenario(t, c, "realnode-"+strings.TrimSuffix(strategy, "-cri"))
	n := requireRealNode(t, c, s.nodeName("node"), strategy)
	s.nodes = append(s.nodes, n.name)
	s.waitExtenderSees(n.name)

	// (1) A pinned pod: flextopo chooses NUMA node 0 (GPU 2 and the
	// machine's CPUs); kubelet's device manager picks GPU 0.
	before := len(n.allocateCalls())
	n.create(s, n.realPod(s, podSpec{name: "pinned", gpus: 1, cpu: "1", memory: "64Mi", guaranteed: true,
		affinity: "numa", mode: "guaranteed"}))
	_, a := s.waitScheduled("pinned")
	if !sameSet(a.GPUs, []string{"GPU-e2e-2"}) || a.CPUSet == "" || len(a.NUMANodes) != 1 || a.NUMANodes[0] != 0 {
		t.Fatalf("pinned: allocation gpus %v cpuset %q numaNodes %v; want GPU-e2e-2 with CPUs of NUMA node 0",
			a.GPUs, a.CPUSet, a.NUMANodes)
	}
	r := n.waitProbe(s, "pinned")
	calls := n.allocateCalls()
	if len(calls) <= before || !sameSet(calls[before], []string{"GPU-e2e-0"}) {
		t.Errorf("kubelet's device manager asked for %v, want GPU-e2e-0 (its own choice, not flextopo's)", calls[before:])
	}
	checkContainer(t, "pinned", r, a.CPUSet, "0", a.GPUs, []string{"GPU-e2e-0"})
	o := n.waitObserved(s, "pinned", func(o *Observed) bool { return o.Source == "nri" })
	if !sameSet(o.GPUs, a.GPUs) || o.CPUSet != a.CPUSet || o.Node != n.name {
		t.Errorf("pinned: observed gpus %v cpuset %q node %q; want the allocation's %v %q on %s",
			o.GPUs, o.CPUSet, o.Node, a.GPUs, a.CPUSet, n.name)
	}

	// (2) A GPU pod bound without flextopo: kubelet gives the lowest GPU it
	// thinks free (GPU 1); the agent leaves it alone and reports it.
	outside := n.realPod(s, podSpec{name: "outside", gpus: 1, cpu: "100m", memory: "32Mi"})
	outside.Spec.NodeName = n.name
	n.create(s, outside)
	r = n.waitProbe(s, "outside")
	wantVisible := "GPU-e2e-1"
	if strategy == strategyCDI {
		wantVisible = "void" // the CDI spec's; the device node is the grant
	}
	if r.visible != wantVisible || deviceState(r.open["/dev/nvidia1"]) != "allowed" {
		t.Errorf("outside: NVIDIA_VISIBLE_DEVICES %q, /dev/nvidia1 %q; want kubelet's choice GPU-e2e-1 (%s) usable",
			r.visible, r.open["/dev/nvidia1"], wantVisible)
	}
	o = n.waitObserved(s, "outside", func(o *Observed) bool { return len(o.GPUs) > 0 })
	if o.Source != "podresources" || !sameSet(o.GPUs, []string{"GPU-e2e-1"}) {
		t.Errorf("outside: observed source %q gpus %v, want podresources [GPU-e2e-1]", o.Source, o.GPUs)
	}
	n.waitDrift(s, "outside")

	// (3) Another flextopo pod: the only GPU no container holds is GPU 0;
	// kubelet hands out GPU 2 (free in its books).
	before = len(n.allocateCalls())
	n.create(s, n.realPod(s, podSpec{name: "after", gpus: 1, cpu: "100m", memory: "32Mi"}))
	_, a = s.waitScheduled("after")
	if !sameSet(a.GPUs, []string{"GPU-e2e-0"}) {
		t.Errorf("after: allocation gpus %v, want [GPU-e2e-0]: GPU 1 is held by the pod placed without flextopo, "+
			"GPU 2 by the pinned pod", a.GPUs)
	}
	r = n.waitProbe(s, "after")
	if calls := n.allocateCalls(); len(calls) > before {
		t.Logf("after: kubelet's device manager asked for %v", calls[before])
	}
	checkContainer(t, "after", r, "", "", a.GPUs, []string{"GPU-e2e-2"})

	// (4) An allocation naming a GPU the node lacks: container creation
	// fails, and says why.
	bad := n.realPod(s, podSpec{name: "bad", cpu: "100m", memory: "32Mi",
		allocation: fmt.Sprintf(`{"version":1,"node":%q,"level":"node","mode":"best-effort","gpus":["GPU-e2e-9"],`+
			`"gpuIndexes":[9],"mig":[],"numaNodes":[],"cpuset":"","memoryMiB":0}`, n.name)})
	bad.Spec.NodeName = n.name
	n.create(s, bad)
	n.waitEvent(s, "bad", regexp.MustCompile(`GPU-e2e-9`))
}

// checkContainer compares what the container has with the allocation:
// cpuset (when pinned), mems, NVIDIA_VISIBLE_DEVICES, the allocated GPUs'
// device nodes open and the others denied.
func checkContainer(t *testing.T, pod string, r *probeResult, cpuset, mems string, gpus, denied []string) {
	t.Helper()
	if cpuset != "" {
		if r.cpus != cpuset || r.allowed != cpuset {
			t.Errorf("%s: cgroup cpuset.cpus %q, Cpus_allowed_list %q; want the allocation's %q", pod, r.cpus, r.allowed, cpuset)
		}
	}
	if mems != "" && r.mems != mems {
		t.Errorf("%s: cgroup cpuset.mems %q, want %q", pod, r.mems, mems)
	}
	if !sameSet(strings.Split(r.visible, ","), gpus) {
		t.Errorf("%s: NVIDIA_VISIBLE_DEVICES %q, want %v", pod, r.visible, gpus)
	}
	for _, g := range gpus {
		if got := deviceState(r.open[minorOf(g)]); got != "allowed" {
			t.Errorf("%s: %s (%s): %q, want it usable", pod, minorOf(g), g, r.open[minorOf(g)])
		}
	}
	for _, g := range denied {
		if what, present := r.open[minorOf(g)]; present && deviceState(what) != "denied" {
			t.Errorf("%s: %s (%s, kubelet's choice): %q, want the device cgroup to deny it", pod, minorOf(g), g, what)
		}
	}
}

// waitEvent waits for an event of the pod whose message matches re.
func (n *realNode) waitEvent(s *scenario, pod string, re *regexp.Regexp) {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cx := harness.Ctx(n.t, 10*time.Second)
		evs := s.events(cx, pod)
		for _, line := range strings.Split(evs, "\n") {
			if re.MatchString(line) {
				n.t.Logf("pod %s event:%s", pod, line)
				return
			}
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("pod %s: no event matching %s after 60s; events:\n%s", pod, re, evs)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitDrift waits until the extender counts the pod as drifted: its
// /metrics gauge and its debug view of the pod.
func (n *realNode) waitDrift(s *scenario, pod string) {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	gauge := regexp.MustCompile(`(?m)^flextopo_drift_pods (\d+)`)
	last := ""
	for {
		code, body := httpGet(n.c.ExtenderURL + "/metrics")
		m := gauge.FindStringSubmatch(body)
		if code == 200 && m != nil && m[1] != "0" {
			_, view := httpGet(n.c.ExtenderDebugURL + "/debug/pods/" + s.ns + "/" + pod)
			n.t.Logf("extender: flextopo_drift_pods %s; /debug/pods/%s/%s: %s", m[1], s.ns, pod, strings.TrimSpace(view))
			if !strings.Contains(view, "GPU-e2e-1") {
				n.t.Errorf("extender's debug view of %s does not show the observed GPU-e2e-1: %s", pod, view)
			}
			return
		}
		last = fmt.Sprintf("HTTP %d, gauge %v", code, m)
		if time.Now().After(deadline) {
			n.t.Fatalf("extender: no drift counted for %s after 30s (%s)", pod, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
