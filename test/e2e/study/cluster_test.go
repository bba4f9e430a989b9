package study

// The living cluster of the preemption study (study_test.go): for each arm a
// fresh etcd and kube-apiserver from k8s-testenv, kwok as the kubelet of
// every node, the arm's kube-scheduler and (arms a and b) a flextopo
// extender of its own. A fresh control plane per arm gives every arm the
// same empty start and leaves no pods of one arm for the next to delete.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"flextopo.dev/e2e/internal/flextopo"
	"flextopo.dev/e2e/internal/harness"
)

const (
	// studyNodeLabel marks the nodes kwok manages.
	studyNodeLabel = "e2e.flextopo.io/kwok"
	// annRunFor is how long a study pod runs once Running (a Go duration,
	// wall clock); kwok's pod-complete stage then marks it Succeeded.
	annRunFor = "e2e.flextopo.io/run-for"

	pcStudyOnline = "study-online" // online inference, preempts
	pcStudyBatch  = "study-batch"  // batch inference and training
	studySched    = "study"        // the arm's kube-scheduler profile
)

// studyPriorities: online preempts batch, whose class never preempts.
var studyPriorities = map[string]int32{pcStudyOnline: 1000, pcStudyBatch: 100}

// kwokStages is kwok's configuration: nodes become Ready once (no
// heartbeats: no node lifecycle controller runs, and 1,000 nodes' heartbeats
// would cost the 2-core machine more than the workload); pods become
// Running, finish (Succeeded) after their annRunFor, and a pod marked for
// deletion is removed deletionGracePeriodSeconds after kwok sees the mark,
// so a victim's graceful termination period is honoured as a kubelet would
// (the deletionTimestamp itself has whole seconds, which would cut the
// period by up to a second).
const kwokStages = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 8
  nodePlayStageParallelism: 4
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: kwok
        reason: KubeletReady
        status: "True"
        type: Ready
      allocatable:
      {{ with .status.allocatable }}
      {{ YAML . 1 }}
      {{ end }}
      capacity:
      {{ with .status.capacity }}
      {{ YAML . 1 }}
      {{ end }}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: kwok
        containerRuntimeVersion: kwok
        kernelVersion: kwok
        kubeProxyVersion: kwok
        bootID: ""
        machineID: ""
        osImage: ""
        systemUUID: ""
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Pending'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.metadata.annotations["` + annRunFor + `"]'
      operator: 'Exists'
  delay:
    durationMilliseconds: 1000
    durationFrom:
      expressionFrom: '.metadata.annotations["` + annRunFor + `"]'
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
      {{ end }}
      phase: Succeeded
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  delay:
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '((.metadata.deletionGracePeriodSeconds // 0) | tostring) + "s"'
  next:
    delete: true
`

// kwokBinary is the kwok command (KWOK, built by scripts/e2e.sh), or "".
func kwokBinary() string {
	if bin := os.Getenv("KWOK"); bin != "" && harness.IsExecutable(bin) {
		return bin
	}
	return ""
}

// studyCluster is one arm's control plane, kwok, nodes and clients.
type studyCluster struct {
	c      *harness.Cluster // etcd, kube-apiserver, the arm's schedulers
	kwok   *harness.Process
	ext    *harness.TestExtender // nil in arm (c)
	sched  *harness.Process
	client kubernetes.Interface // high QPS: the driver creates and deletes fast
	nodes  []string
	topos  map[string]*flextopo.Topology
	// devices is each node's device capacity (Topology.DeviceCapacity),
	// worked out once for the samples' check.
	devices map[string]corev1.ResourceList
	kinds   map[string]string // node -> server kind
}

// startStudyControlPlane starts etcd and kube-apiserver in dir.
func startStudyControlPlane(t *testing.T, dir, testenv string) *studyCluster {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c := &harness.Cluster{WorkDir: dir, RepoRoot: env.RepoRoot, Testenv: testenv}
	t.Cleanup(c.Stop)
	if err := c.StartControlPlane(testenv, 1000, 2000); err != nil {
		t.Fatal(err)
	}
	sc := &studyCluster{c: c, client: c.Client, topos: map[string]*flextopo.Topology{}, kinds: map[string]string{},
		devices: map[string]corev1.ResourceList{}}
	cx := harness.Ctx(t, 30*time.Second)
	if err := harness.CreatePriorityClasses(cx, c.Client, studyPriorities, map[string]bool{pcStudyBatch: true},
		"flextopo preemption study"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(cx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: studyNS}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return sc
}

const studyNS = "study"

// addNodes creates the nodes (capacity as the device plugin would
// advertise it; no Ready condition yet) and then starts kwok, which makes
// them Ready; it waits until every node is Ready.
func (sc *studyCluster) addNodes(t *testing.T, nodes []studyNode, kwokBin string) {
	t.Helper()
	start := time.Now()
	err := harness.Parallel(len(nodes), 16, func(i int) error {
		n := nodes[i]
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        n.name,
			Labels:      map[string]string{studyNodeLabel: "true", "kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "e2e.flextopo.io/server": n.kind},
			Annotations: map[string]string{flextopo.AnnTopology: n.topo.JSON()},
		}}
		cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		created, err := sc.client.CoreV1().Nodes().Create(cx, node, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		capacity := n.topo.NodeCapacity()
		created.Status = corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()}
		_, err = sc.client.CoreV1().Nodes().UpdateStatus(cx, created, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("create study nodes: %v", err)
	}
	for _, n := range nodes {
		sc.nodes = append(sc.nodes, n.name)
		sc.topos[n.name] = n.topo
		sc.kinds[n.name] = n.kind
		sc.devices[n.name] = n.topo.DeviceCapacity()
	}
	cfgPath := filepath.Join(sc.c.WorkDir, "kwok.yaml")
	if err := os.WriteFile(cfgPath, []byte(kwokStages), 0o600); err != nil {
		t.Fatal(err)
	}
	sc.kwok = harness.TestProcess(t, "kwok", sc.c.WorkDir, kwokBin,
		"--kubeconfig="+sc.c.Kubeconfig, "--config="+cfgPath,
		"--manage-nodes-with-label-selector="+studyNodeLabel+"=true",
		"--node-lease-duration-seconds=0", "--v=WARN")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if err := sc.kwok.CheckAlive(); err != nil {
			t.Fatal(err)
		}
		cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		l, err := sc.client.CoreV1().Nodes().List(cx, metav1.ListOptions{ResourceVersion: "0"})
		cancel()
		ready := 0
		if err == nil {
			for i := range l.Items {
				for _, cond := range l.Items[i].Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
		}
		if ready == len(nodes) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kwok: %d of %d nodes Ready after 3m; kwok log:\n%s", ready, len(nodes), harness.TailFile(sc.kwok.LogPath, 40))
		}
		time.Sleep(time.Second)
	}
	t.Logf("%d nodes created and Ready (kwok) in %s", len(nodes), time.Since(start).Round(100*time.Millisecond))
}

// startArm starts the arm's extender (arms a and b) and kube-scheduler.
func (sc *studyCluster) startArm(t *testing.T, arm string) {
	t.Helper()
	if arm != armAlone {
		// The shipped configuration (fragmentation window and all) at info
		// level, as a user would run it.
		sc.ext = sc.c.StartTestExtender(t, "flextopo-extender", map[string]interface{}{"logLevel": "info"})
	}
	p, err := sc.c.StartExtraScheduler("kube-scheduler-"+arm, studySched, func(cfg map[string]interface{}) error {
		cc := cfg["clientConnection"].(map[string]interface{})
		// kube-scheduler's default 50 QPS would cap binds and the
		// victims' deletions below what the workload asks.
		cc["qps"], cc["burst"] = 500, 1000
		// kube-scheduler's adaptive share of nodes, as bench/README.md's
		// figures were measured (the shipped configuration sets 100).
		cfg["percentageOfNodesToScore"] = 0
		switch arm {
		case armAlone:
			delete(cfg, "extenders")
		default:
			ext0 := cfg["extenders"].([]interface{})[0].(map[string]interface{})
			ext0["urlPrefix"] = sc.ext.URL
			if arm == armNoPreempt {
				delete(ext0, "preemptVerb")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sc.sched = p
}

// alive fails when a component of the arm has exited.
func (sc *studyCluster) alive() error {
	ps := []*harness.Process{sc.c.Etcd, sc.c.APIServer, sc.kwok, sc.sched}
	if sc.ext != nil {
		ps = append(ps, sc.ext.Proc)
	}
	var errs []string
	for _, p := range ps {
		if p == nil {
			continue
		}
		if err := p.CheckAlive(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}
