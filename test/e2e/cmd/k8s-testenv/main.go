// Command k8s-testenv is a single busybox-style binary holding the
// control-plane components the flextopo end-to-end test needs, and the
// kubelet of its real node (realnode_test.go):
//
//	k8s-testenv etcd [etcd flags...]
//	k8s-testenv kube-apiserver [kube-apiserver flags...]
//	k8s-testenv kube-controller-manager [kube-controller-manager flags...]
//	k8s-testenv kube-scheduler [kube-scheduler flags...]
//	k8s-testenv kubelet [kubelet flags...]
//
// kube-controller-manager serves the DRA scenario (dra_test.go): its
// resourceclaim controller makes the claims of ResourceClaimTemplates and
// deallocates claims whose pods are gone, and its garbage collector deletes
// the claims of deleted pods.
//
// Linking them into one binary lets the large shared dependency graph
// (client-go, apimachinery, apiserver, ...) compile and link once, which keeps
// a cold build inside the CI budget of a small machine.
package main

import (
	"context"
	"fmt"
	"os"
	_ "time/tzdata" // kube-apiserver: timeZone support in CronJob

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric registration
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func usage() {
	fmt.Fprintf(os.Stderr, "usage: %s etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet [flags...]\n", os.Args[0])
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	sub, rest := os.Args[1], os.Args[2:]
	switch sub {
	case "etcd":
		// etcdmain parses args[1:] as its flags; args[0] is the program name.
		etcdmain.Main(append([]string{"etcd"}, rest...))
	case "kube-apiserver":
		cmd := apiserver.NewAPIServerCommand()
		cmd.SetArgs(rest)
		os.Exit(cli.Run(cmd))
	case "kube-controller-manager":
		cmd := controllermanager.NewControllerManagerCommand()
		cmd.SetArgs(rest)
		os.Exit(cli.Run(cmd))
	case "kube-scheduler":
		cmd := scheduler.NewSchedulerCommand()
		cmd.SetArgs(rest)
		os.Exit(cli.Run(cmd))
	case "kubelet":
		cmd := kubelet.NewKubeletCommand(context.Background())
		cmd.SetArgs(rest)
		os.Exit(cli.Run(cmd))
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "unknown subcommand %q\n", sub)
		usage()
	}
}
