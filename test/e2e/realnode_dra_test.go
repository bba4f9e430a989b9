package e2e

// The real node with Dynamic Resource Allocation: no device plugin. The DRA
// kubelet plugin stand-in (draplugin/, built by scripts/e2e.sh, DRA_PLUGIN)
// registers with kubelet, publishes the three stand-in GPUs in a
// ResourceSlice shaped like NVIDIA's driver's (pool = node, gpu-<minor>,
// uuid, numaNode) and, when kubelet prepares a claim, writes its CDI spec
// (k8s.gpu.nvidia.com/claim=<claim UID>-<device>: the GPU's device node,
// GPU_DEVICE_<minor>=<uuid>, NVIDIA_VISIBLE_DEVICES=void), which containerd
// (enable_cdi) resolves before NRI sees the container.
//
// No extender takes part: the test does what kube-scheduler's DynamicResources
// plugin and flextopo's bind do on a DRA node. It allocates the pod's
// ResourceClaim to one GPU and reserves it for the pod (PreBind's writes; an
// allocator other than kube-scheduler may write them, KEP-4381), writes the
// pod's flextopo.io/allocation with the dra key and the CPUs of that GPU's
// NUMA node, and binds the pod. Then, from inside the container and from
// flextopo.io/observed:
//   - a pinned pod runs on the allocation's cpuset and its GPU's NUMA node's
//     memory, with no /dev/nvidia* but the one its CDI device injected, and
//     the CDI spec's environment untouched by the agent;
//   - a pod whose allocation names another GPU than its claim holds is
//     reported as drift, the device it really got named by its CDI device.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"flextopo.dev/e2e/internal/harness"
)

const draDriver = "gpu.nvidia.com"

// startDRAPlugin runs the stand-in with the node's GPUs: their uuids, minors,
// NUMA nodes (standInNUMA, as the topology says), bus ids (those of the
// driver's procfs stand-ins) and device nodes.
func (n *realNode) startDRAPlugin(bin string) {
	var gpus []map[string]interface{}
	for i, u := range n.gpuUUIDs {
		gpus = append(gpus, map[string]interface{}{"uuid": u, "minor": i, "numaNode": standInNUMA(i),
			"pciBusID": fmt.Sprintf("0000:%02x:00.0", i+1), "productName": testGPUModel,
			"memory": strconv.Itoa(testGPUMemMiB) + "Mi", "devicePath": filepath.Join(n.dir, "dev", fmt.Sprintf("nvidia%d", i))})
	}
	raw, err := yaml.Marshal(map[string]interface{}{"gpus": gpus})
	if err != nil {
		n.t.Fatal(err)
	}
	cfg := filepath.Join(n.dir, "draplugin.yaml")
	if err := os.WriteFile(cfg, raw, 0o644); err != nil {
		n.t.Fatal(err)
	}
	// Its log is shown when the test fails (testProcess).
	harness.TestProcess(n.t, "draplugin", n.dir, bin, "--node-name", n.name, "--kubeconfig", n.c.Kubeconfig,
		"--config", cfg, "--kubelet-root", filepath.Join(n.dir, "kubelet"), "--cdi-root", n.cdiDir(), "--v", "4")
}

// draSlices are the node's ResourceSlices of NVIDIA's driver.
func (n *realNode) draSlices() ([]resourceapi.ResourceSlice, error) {
	cx := harness.Ctx(n.t, 10*time.Second)
	list, err := n.c.Client.ResourceV1().ResourceSlices().List(cx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + n.name + ",spec.driver=" + draDriver})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// publishedDRADevices counts the devices of the node's slices, for waitReady.
func (n *realNode) publishedDRADevices() (int64, string) {
	list, err := n.draSlices()
	if err != nil {
		return 0, "ResourceSlices: " + err.Error()
	}
	count := 0
	for _, s := range list {
		count += len(s.Spec.Devices)
	}
	return int64(count), fmt.Sprintf("%d devices of %s in %d ResourceSlices", count, draDriver, len(list))
}

// claimFor creates a claim of one GPU and allocates it to the device, as
// the allocator's result lands in status.allocation.
func (n *realNode) claimFor(s *scenario, name, device string) *resourceapi.ResourceClaim {
	n.t.Helper()
	cx := harness.Ctx(n.t, 30*time.Second)
	claims := n.c.Client.ResourceV1().ResourceClaims(s.ns)
	claim, err := claims.Create(cx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: draDriver}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatalf("create claim %s: %v", name, err)
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: draDriver, Pool: n.name, Device: device}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n.name}}}}}},
	}
	if claim, err = claims.UpdateStatus(cx, claim, metav1.UpdateOptions{}); err != nil {
		n.t.Fatalf("allocate claim %s: %v", name, err)
	}
	return claim
}

// draPod creates the pod with the claim for its container, reserves the
// claim for it and binds it to the node: nothing schedules it
// (schedulerName names no scheduler).
func (n *realNode) draPod(s *scenario, ps podSpec, claim *resourceapi.ResourceClaim) {
	n.t.Helper()
	cx := harness.Ctx(n.t, 30*time.Second)
	ps.schedulerName = "flextopo-e2e-none"
	p := n.realPod(s, ps)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim.Name}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	created, err := n.c.Client.CoreV1().Pods(s.ns).Create(cx, p, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatalf("create pod %s: %v", ps.name, err)
	}
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: created.Name, UID: created.UID}}
	if _, err := n.c.Client.ResourceV1().ResourceClaims(s.ns).UpdateStatus(cx, claim, metav1.UpdateOptions{}); err != nil {
		n.t.Fatalf("reserve claim %s for pod %s: %v", claim.Name, ps.name, err)
	}
	err = n.c.Client.CoreV1().Pods(s.ns).Bind(cx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: created.Name},
		Target: corev1.ObjectReference{Kind: "Node", Name: n.name}}, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatalf("bind pod %s: %v", ps.name, err)
	}
}

// draAllocation is the pod's flextopo.io/allocation: the claim's device
// under the dra key and, as gpus, the uuid the annotation names for it.
func draAllocation(node string, claim *resourceapi.ResourceClaim, device, uuid, cpuset string, numa []int) string {
	return fmt.Sprintf(`{"version":1,"node":%q,"level":"numa","mode":"guaranteed",`+
		`"gpus":[%q],"gpuIndexes":[%s],"mig":[],"cpuset":%q,"numaNodes":%s,"memoryMiB":64,`+
		`"dra":{"devices":[{"claim":%q,"claimUID":%q,"request":"gpu","driver":%q,"pool":%q,"device":%q,"uuid":%q}]}}`,
		node, uuid, strings.TrimPrefix(device, "gpu-"), cpuset, intList(numa),
		claim.Namespace+"/"+claim.Name, claim.UID, draDriver, node, device, uuid)
}

func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func TestRealNodeDRAPodGetsItsGPUsNUMANode(t *testing.T) {
	c := requireCluster(t)
	s := newScenario(t, c, "realnode-dra")
	n := requireRealNode(t, c, s.nodeName("node"), strategyDRA)
	s.nodes = append(s.nodes, n.name)

	// The slice, as NVIDIA's driver publishes it: one pool named after the
	// node, gpu-<minor>, the uuid and NUMA node of each GPU.
	published, err := n.draSlices()
	if err != nil || len(published) != 1 {
		t.Fatalf("ResourceSlices of %s: %d, %v; want one", n.name, len(published), err)
	}
	pool := published[0].Spec.Pool
	if pool.Name != n.name || pool.ResourceSliceCount != 1 {
		t.Errorf("pool %+v, want %s with one slice", pool, n.name)
	}
	numaOf := map[string]int64{}
	for i, d := range published[0].Spec.Devices {
		uuid, numa := d.Attributes["uuid"].StringValue, d.Attributes["resource.kubernetes.io/numaNode"].IntValue
		if d.Name != fmt.Sprintf("gpu-%d", i) || uuid == nil || *uuid != n.gpuUUIDs[i] || numa == nil || *numa != int64(standInNUMA(i)) {
			t.Fatalf("device %d: %s uuid %v numaNode %v; want gpu-%d %s on NUMA node %d", i, d.Name, uuid, numa, i, n.gpuUUIDs[i], standInNUMA(i))
		}
		numaOf[d.Name] = *numa
	}

	// (1) DRA gives the pod gpu-2; its NUMA node (0) has the machine's CPUs.
	// flextopo pins the pod to one of them: the last.
	_, last := onlineCPUs(t)
	cpuset, mems := strconv.Itoa(last), strconv.FormatInt(numaOf["gpu-2"], 10)
	claim := n.claimFor(s, "pinned-gpu", "gpu-2")
	n.draPod(s, podSpec{name: "pinned", cpu: "1", memory: "64Mi", guaranteed: true,
		allocation: draAllocation(n.name, claim, "gpu-2", n.gpuUUIDs[2], cpuset, []int{int(numaOf["gpu-2"])})}, claim)
	r := n.waitProbe(s, "pinned")
	if r.cpus != cpuset || r.allowed != cpuset || r.mems != mems {
		t.Errorf("pinned: cgroup cpuset.cpus %q, Cpus_allowed_list %q, cpuset.mems %q; want the allocation's %q and gpu-2's NUMA node %s",
			r.cpus, r.allowed, r.mems, cpuset, mems)
	}
	if !slices.Equal(r.nodes, []string{"nvidia2"}) || deviceState(r.open["/dev/nvidia2"]) != "allowed" {
		t.Errorf("pinned: /dev/nvidia* %v, /dev/nvidia2 %q; want only the CDI-injected nvidia2, usable", r.nodes, r.open["/dev/nvidia2"])
	}
	if r.visible != "void" || !slices.Equal(r.gpuEnv, []string{"GPU_DEVICE_2=" + n.gpuUUIDs[2]}) {
		t.Errorf("pinned: NVIDIA_VISIBLE_DEVICES %q, %v; want the CDI spec's void and GPU_DEVICE_2=%s (the agent sets none)",
			r.visible, r.gpuEnv, n.gpuUUIDs[2])
	}
	o := n.waitObserved(s, "pinned", func(o *Observed) bool { return o.Source == "nri" && len(o.GPUs) > 0 })
	if !slices.Equal(o.GPUs, []string{n.gpuUUIDs[2]}) || o.CPUSet != cpuset || len(o.MIG) != 0 {
		t.Errorf("pinned: observed gpus %v mig %v cpuset %q; want [%s] and %q", o.GPUs, o.MIG, o.CPUSet, n.gpuUUIDs[2], cpuset)
	}
	// NRI sees the CDI-resolved device node; whether it also sees the CDI
	// device's name depends on the runtime (containerd >= 2.3 passes it in
	// Container.CDIDevices, 2.2 does not: the agent then asks kubelet).
	line := n.adjustedLine("pinned")
	if !strings.Contains(line, "devnodes=/dev/nvidia2") {
		t.Errorf("agent: %q; want the container's device nodes as NRI saw them: /dev/nvidia2 alone", line)
	}
	if cdi := regexp.MustCompile(` cdi=(\S*)`).FindStringSubmatch(line); cdi == nil ||
		(cdi[1] != `""` && cdi[1] != "k8s.gpu.nvidia.com/claim="+string(claim.UID)+"-gpu-2") {
		t.Errorf("agent: %q; want cdi= empty or the claim's CDI device", line)
	}

	// (2) The claim holds gpu-0, the allocation says gpu-1: drift, the
	// device the container got named by its CDI device, gpu-1 missing.
	claim = n.claimFor(s, "drifted-gpu", "gpu-0")
	n.draPod(s, podSpec{name: "drifted", cpu: "100m", memory: "32Mi",
		allocation: draAllocation(n.name, claim, "gpu-1", n.gpuUUIDs[1], "", nil)}, claim)
	r = n.waitProbe(s, "drifted")
	if !slices.Equal(r.nodes, []string{"nvidia0"}) {
		t.Errorf("drifted: /dev/nvidia* %v, want the claim's nvidia0 alone (the agent adds none)", r.nodes)
	}
	got := "k8s.gpu.nvidia.com/claim=" + string(claim.UID) + "-gpu-0"
	o = n.waitObserved(s, "drifted", func(o *Observed) bool { return len(o.GPUs) > 0 })
	if !slices.Equal(o.GPUs, []string{got}) {
		t.Errorf("drifted: observed gpus %v, want [%s]: the unit the allocation does not list", o.GPUs, got)
	}
	n.waitAgentLog(regexp.MustCompile(`lacks CDI device k8s\.gpu\.nvidia\.com/claim=` + string(claim.UID) + `-gpu-1 of its claims`))
}

// adjustedLine is the agent's log line for the pod's container: cdi= is
// what the runtime reported in NRI's Container.CDIDevices, devnodes= the
// /dev/nvidia* nodes it had put in the container.
func (n *realNode) adjustedLine(pod string) string {
	raw, _ := os.ReadFile(n.agentLog)
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, "adjusted container") && strings.Contains(line, "/"+pod+" ") {
			n.t.Logf("agent: %s", line)
			return line
		}
	}
	return ""
}

// waitAgentLog waits for a line of the agent's log that matches re.
func (n *realNode) waitAgentLog(re *regexp.Regexp) {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, _ := os.ReadFile(n.agentLog)
		if loc := re.FindIndex(raw); loc != nil {
			start := strings.LastIndexByte(string(raw[:loc[0]]), '\n') + 1
			end := loc[1] + strings.IndexByte(string(raw[loc[1]:])+"\n", '\n')
			n.t.Logf("agent: %s", raw[start:end])
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("agent log: no line matching %s after 30s:\n%s", re, harness.TailFile(n.agentLog, 30))
		}
		time.Sleep(300 * time.Millisecond)
	}
}
