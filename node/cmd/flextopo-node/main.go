// Command flextopo-node is flextopo's node agent, run as a DaemonSet:
//
//   - enforce (default): an NRI plugin (containerd >= 1.7, CRI-O >= 1.26 with
//     NRI enabled) that sets each container's cpuset.cpus, cpuset.mems, GPU
//     device nodes and NVIDIA_VISIBLE_DEVICES from its pod's
//     flextopo.io/allocation, and fails the creation of a container whose
//     allocation is malformed or names a unit the node does not have; for a
//     pod whose GPUs DRA chose (the allocation's dra key) it sets only the
//     cpusets, and the DRA driver's CDI devices give the GPUs;
//   - observe (always, and alone in observe mode): writes what the node
//     really assigned on each pod (flextopo.io/observed), from what the
//     plugin applied or from kubelet's PodResources API, with a DRA pod's
//     CDI devices checked against its allocation;
//   - publish: keeps the node's flextopo.io/topology equal to discovery.
//
// See docs/node-agent.md, "Node settings", for the node settings it needs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/stub"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"flextopo.dev/node/alloc"
	"flextopo.dev/node/internal/agent"
	"flextopo.dev/node/internal/enforce"
	"flextopo.dev/node/internal/inventory"
)

type options struct {
	node, mode, kubeconfig, listen, logLevel   string
	nriSocket, nriName, nriIndex, podResources string
	discover                                   string
	publish                                    bool
	observeEvery, topologyEvery                time.Duration
	nvidiaProc, sysRoot                        string
	gpuResource, migPrefix, sharedResource     string
	printInventory                             bool
}

func parseFlags() (*options, error) {
	o := &options{}
	fs := flag.CommandLine
	fs.StringVar(&o.node, "node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	fs.StringVar(&o.mode, "mode", "enforce", "enforce: NRI plugin plus reporting; observe: reporting only")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster service account)")
	fs.StringVar(&o.listen, "listen", ":8095", "address of /healthz, /readyz and /metrics")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.nriSocket, "nri-socket", "/var/run/nri/nri.sock", "the runtime's NRI socket")
	fs.StringVar(&o.nriName, "nri-plugin-name", "flextopo", "NRI plugin name")
	fs.StringVar(&o.nriIndex, "nri-plugin-index", "90", "NRI plugin index (two digits; later plugins see and may override earlier ones' changes)")
	fs.StringVar(&o.podResources, "pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "kubelet's PodResources socket; empty: do not ask kubelet")
	fs.DurationVar(&o.observeEvery, "observe-interval", 10*time.Second, "how often to compare and report what pods hold")
	fs.BoolVar(&o.publish, "publish-topology", true, "write the node's flextopo.io/topology from discovery")
	fs.StringVar(&o.discover, "discover-command", "flextopo-discover", "discovery command printing the topology annotation (split on spaces)")
	fs.DurationVar(&o.topologyEvery, "topology-interval", time.Minute, "how often to rerun discovery")
	fs.StringVar(&o.nvidiaProc, "nvidia-proc-root", inventory.DefaultRoots.NvidiaProc, "the NVIDIA driver's procfs directory")
	fs.StringVar(&o.sysRoot, "sys-root", inventory.DefaultRoots.Sys, "sysfs root")
	fs.StringVar(&o.gpuResource, "gpu-resource", enforce.DefaultResources.GPU, "resource name of whole GPUs")
	fs.StringVar(&o.migPrefix, "mig-resource-prefix", enforce.DefaultResources.MIGPrefix, "resource name prefix of MIG devices (mixed strategy)")
	fs.StringVar(&o.sharedResource, "shared-resource", "", "resource name of shared GPU replicas, when not the GPU resource (the topology's sharedResource)")
	fs.BoolVar(&o.printInventory, "print-inventory", false, "print what the agent sees on this node (GPUs and their device minors, online CPUs and NUMA nodes) as JSON, and exit")
	flag.Parse()
	switch {
	case o.printInventory:
		return o, nil
	case o.node == "":
		return nil, errors.New("--node-name (or $NODE_NAME) is required")
	case o.mode != "enforce" && o.mode != "observe":
		return nil, fmt.Errorf("--mode %q: want enforce or observe", o.mode)
	case o.observeEvery <= 0 || o.topologyEvery <= 0:
		return nil, errors.New("--observe-interval and --topology-interval must be positive")
	}
	return o, nil
}

func main() {
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "flextopo-node:", err)
		os.Exit(2)
	}
	if o.printInventory {
		err = printInventory(o)
	} else {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flextopo-node:", err)
		os.Exit(1)
	}
}

func logger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %v", level, err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func client(kubeconfig string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("API server credentials: %w", err)
	}
	cfg.UserAgent = "flextopo-node"
	return kubernetes.NewForConfig(cfg)
}

type state struct {
	nriConnected atomic.Bool
	podsSynced   atomic.Bool
}

func run(o *options) error {
	log, err := logger(o.logLevel)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	kc, err := client(o.kubeconfig)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	metrics := agent.NewMetrics(reg)
	res := enforce.Resources{GPU: o.gpuResource, MIGPrefix: o.migPrefix, Shared: o.sharedResource}
	st := &state{}
	pods := agent.NewNodePods(ctx, kc, o.node)
	record := agent.NewRecord()
	pub := &agent.Publisher{Node: o.node, Client: kc, Command: strings.Fields(o.discover), Log: log, Metrics: metrics}

	go serve(ctx, o.listen, reg, st, o.mode, log)
	if o.publish {
		go pub.Run(ctx, o.topologyEvery)
	}
	if !pods.Wait(ctx) {
		return ctx.Err()
	}
	st.podsSynced.Store(true)

	rep := &agent.Reporter{Node: o.node, Client: kc, Pods: pods, Record: record, Resources: res, Log: log, Metrics: metrics,
		Enforcing: o.mode == "enforce"}
	if o.podResources != "" {
		prc, err := agent.DialPodResources(o.podResources)
		if err != nil {
			return fmt.Errorf("pod resources socket %s: %w", o.podResources, err)
		}
		defer prc.Close()
		rep.PodResources = prc
	}
	go rep.Run(ctx, o.observeEvery)

	if o.mode == "enforce" {
		inv := inventorySource(kc, o, pub)
		plugin := &agent.Plugin{Node: o.node, Resources: res, Pods: pods, Inventory: inv, Record: record, Log: log, Metrics: metrics}
		runNRI(ctx, o, plugin, st, log)
	}
	<-ctx.Done()
	log.Info("stopping")
	return nil
}

// inventorySource reads the driver and sysfs on every call (a few small
// files) with the MIG devices of the topology last published, or the node's.
func inventorySource(kc kubernetes.Interface, o *options, pub *agent.Publisher) agent.InventorySource {
	roots := inventory.Roots{NvidiaProc: o.nvidiaProc, Sys: o.sysRoot}
	return func() (*enforce.Inventory, error) {
		topo := pub.Current()
		if topo == "" {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if n, err := kc.CoreV1().Nodes().Get(ctx, o.node, metav1.GetOptions{}); err == nil {
				topo = n.Annotations[alloc.TopologyAnnotation]
			}
		}
		return inventory.Read(roots, topo)
	}
}

// printInventory shows what the agent reads from the NVIDIA driver and sysfs
// (MIG devices need the topology, which it does not read here).
func printInventory(o *options) error {
	inv, err := inventory.Read(inventory.Roots{NvidiaProc: o.nvidiaProc, Sys: o.sysRoot}, "")
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(inventory.Summarize(inv))
}

// runNRI connects the plugin and reconnects (the runtime may restart) until
// ctx ends.
func runNRI(ctx context.Context, o *options, p *agent.Plugin, st *state, log *slog.Logger) {
	go func() {
		backoff := time.Second
		for ctx.Err() == nil {
			s, err := stub.New(p, stub.WithPluginName(o.nriName), stub.WithPluginIdx(o.nriIndex),
				stub.WithSocketPath(o.nriSocket), stub.WithOnClose(func() { st.nriConnected.Store(false) }))
			if err == nil {
				if err = s.Start(ctx); err == nil {
					st.nriConnected.Store(true)
					backoff = time.Second
					log.Info("connected to the runtime's NRI", "socket", o.nriSocket)
					s.Wait()
					err = errors.New("connection closed")
				}
			}
			st.nriConnected.Store(false)
			log.Warn("NRI plugin not connected; retrying", "socket", o.nriSocket, "err", err, "in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
		}
	}()
}

func serve(ctx context.Context, addr string, reg *prometheus.Registry, st *state, mode string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case !st.podsSynced.Load():
			http.Error(w, "pods of this node not listed yet", http.StatusServiceUnavailable)
		case mode == "enforce" && !st.nriConnected.Load():
			http.Error(w, "not connected to the runtime's NRI socket", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("health and metrics listener", "addr", addr, "err", err)
	}
}
