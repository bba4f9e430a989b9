// Command draplugin is a stand-in for NVIDIA's DRA kubelet plugin
// (dra-driver-nvidia-gpu, driver gpu.nvidia.com) on the e2e's real node,
// written on k8s.io/dynamic-resource-allocation/kubeletplugin: it registers
// with kubelet, publishes the node's stand-in GPUs in a ResourceSlice of pool
// <node>, and on NodePrepareResources writes each claim's CDI spec, which
// containerd resolves into the container's device nodes and environment.
//
//	draplugin --node-name N --kubeconfig F --config gpus.yaml \
//	    [--kubelet-root DIR] [--cdi-root DIR]
//
// The configuration lists the node's GPUs (driver.go Config):
//
//	gpus:
//	- {uuid: GPU-e2e-0, minor: 0, numaNode: 1, pciBusID: "0000:01:00.0", devicePath: /work/dev/nvidia0}
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

type options struct {
	node, kubeconfig, config, kubeletRoot, cdiRoot string
}

func parseFlags() (*options, error) {
	o := &options{}
	klog.InitFlags(nil)
	flag.StringVar(&o.node, "node-name", os.Getenv("NODE_NAME"), "this node's name: the pool's name (default $NODE_NAME)")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file")
	flag.StringVar(&o.config, "config", "", "the node's stand-in GPUs (YAML or JSON)")
	flag.StringVar(&o.kubeletRoot, "kubelet-root", "/var/lib/kubelet", "kubelet's --root-dir: the plugin registers in <root>/plugins_registry and serves in <root>/plugins/"+driverName)
	flag.StringVar(&o.cdiRoot, "cdi-root", "/var/run/cdi", "where the claims' CDI specs go (a cdi_spec_dirs entry of the runtime)")
	flag.Parse()
	switch {
	case o.node == "":
		return nil, fmt.Errorf("--node-name (or $NODE_NAME) is required")
	case o.kubeconfig == "":
		return nil, fmt.Errorf("--kubeconfig is required")
	case o.config == "":
		return nil, fmt.Errorf("--config is required")
	}
	return o, nil
}

func main() {
	o, err := parseFlags()
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "draplugin:", err)
		os.Exit(1)
	}
}

func run(o *options) error {
	cfg, err := readConfig(o.config)
	if err != nil {
		return err
	}
	rest, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	rest.UserAgent = "draplugin (" + driverName + " stand-in)"
	client, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return err
	}
	registry := filepath.Join(o.kubeletRoot, "plugins_registry")
	dataDir := filepath.Join(o.kubeletRoot, "plugins", driverName)
	for _, dir := range []string{registry, dataDir, o.cdiRoot} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fatal := make(chan error, 1)
	driver := NewDriver(o.node, o.cdiRoot, cfg, func(err error) {
		select {
		case fatal <- err:
		default:
		}
	})
	helper, err := kubeletplugin.Start(ctx, driver,
		kubeletplugin.DriverName(driverName),
		kubeletplugin.NodeName(o.node),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(registry),
		kubeletplugin.PluginDataDirectoryPath(dataDir))
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	if err := helper.PublishResources(ctx, cfg.Resources(o.node)); err != nil {
		return fmt.Errorf("publish the ResourceSlice: %w", err)
	}
	klog.InfoS("serving", "driver", driverName, "node", o.node, "gpus", len(cfg.GPUs), "registry", registry, "cdiRoot", o.cdiRoot)
	select {
	case <-ctx.Done(): // a signal: stop quietly
		return nil
	case err := <-fatal:
		return err
	}
}
