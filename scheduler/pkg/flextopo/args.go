package flextopo

import (
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Args are the plugin's arguments in a KubeSchedulerConfiguration
// profile's pluginConfig (name FlexTopo):
//
//	pluginConfig:
//	  - name: FlexTopo
//	    args:
//	      configFile: /etc/flextopo/flextopo.yaml
//	      minCandidateNodesPercentage: 10
//	      minCandidateNodesAbsolute: 100
type Args struct {
	metav1.TypeMeta `json:",inline"`

	// ConfigFile is flextopo's own configuration (configs/flextopo.yaml):
	// policy, annotation prefix, default affinity mode, fragmentation
	// window, DRA, debugListen, metricsListen, webhookListen and the rest.
	// The keys of the extender's API listener and watch (listen,
	// tlsClientCAFile, maxConnections, threads, snapshot, watchBackoff*)
	// are ignored (README.md). Empty: the defaults.
	ConfigFile string `json:"configFile,omitempty"`

	// MinCandidateNodesPercentage and MinCandidateNodesAbsolute bound the
	// nodes preemption dry-runs, as DefaultPreemption's arguments of the
	// same names do (this plugin's PostFilter replaces it). Defaults 10
	// and 100, kube-scheduler's.
	MinCandidateNodesPercentage *int32 `json:"minCandidateNodesPercentage,omitempty"`
	MinCandidateNodesAbsolute   *int32 `json:"minCandidateNodesAbsolute,omitempty"`
}

// SetDefaults fills what the configuration left out with kube-scheduler's
// defaults for DefaultPreemptionArgs.
func SetDefaults(a *Args) {
	if a.MinCandidateNodesPercentage == nil {
		v := int32(10)
		a.MinCandidateNodesPercentage = &v
	}
	if a.MinCandidateNodesAbsolute == nil {
		v := int32(100)
		a.MinCandidateNodesAbsolute = &v
	}
}

// Validate checks defaulted arguments: the configuration file exists, and
// the preemption bounds are what DefaultPreemption accepts.
func Validate(a *Args) error {
	path := field.NewPath("pluginConfig").Key(Name).Child("args")
	if a.ConfigFile != "" {
		if _, err := os.Stat(a.ConfigFile); err != nil {
			return field.Invalid(path.Child("configFile"), a.ConfigFile, err.Error())
		}
	}
	return validation.ValidateDefaultPreemptionArgs(path, a.preemptionArgs())
}

func (a *Args) preemptionArgs() *schedconfig.DefaultPreemptionArgs {
	return &schedconfig.DefaultPreemptionArgs{
		MinCandidateNodesPercentage: *a.MinCandidateNodesPercentage,
		MinCandidateNodesAbsolute:   *a.MinCandidateNodesAbsolute,
	}
}

// decodeArgs reads the profile's arguments (nil: none given), defaulted
// and validated.
func decodeArgs(obj runtime.Object) (*Args, error) {
	a := &Args{}
	if err := frameworkruntime.DecodeInto(obj, a); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	SetDefaults(a)
	if err := Validate(a); err != nil {
		return nil, err
	}
	return a, nil
}
