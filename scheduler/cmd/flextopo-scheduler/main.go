// Command flextopo-scheduler is kube-scheduler v1.36.3 with flextopo's
// framework plugins registered (pkg/flextopo, name FlexTopo): the same
// flags and KubeSchedulerConfiguration as kube-scheduler; a profile
// enables the plugin (configs/scheduler-plugin-config.yaml).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"flextopo.dev/scheduler/pkg/flextopo"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(flextopo.Name, flextopo.New))
	os.Exit(cli.Run(cmd))
}
