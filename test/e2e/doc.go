// Package e2e is the flextopo end-to-end test: it starts etcd, kube-apiserver,
// kube-scheduler (all from the k8s-testenv binary built by scripts/e2e.sh) and
// the flextopo extender on 127.0.0.1, creates nodes through the API (no
// kubelets) and checks where the scheduler, guided by the extender, places
// GPU pods.
//
// The preemption scenarios (preempt_test.go) also start a second
// kube-scheduler, profile "flextopo-nopreempt", from the same configuration
// without preemptVerb, to compare flextopo's victims with kube-scheduler's.
//
// The preemption study is a package of its own, study/. Both start their
// components through internal/harness and read and write flextopo's
// annotations through internal/flextopo.
//
// mig_shared_test.go holds the scenarios of MIG policies, capability
// requirements and fractions of shared GPUs (issue 4); README.md lists the
// scenarios of every file.
//
// dra_test.go runs flextopo on a DRA cluster of its own (docs/dra.md): etcd,
// kube-apiserver, kube-controller-manager (resourceclaim controller and
// garbage collector), kube-scheduler registered without managedResources,
// the extender with its admission webhook; NVIDIA-shaped ResourceSlices on
// DRA nodes beside device-plugin nodes. Seeded random pods with claim
// templates, shared claims, nvidia.com/gpu (KEP-5004) and MIG claims are
// created, scheduled and deleted while invariants are checked all along
// (dra_check_test.go): no device in two claims, flextopo's model equal to
// the claims, every allocation naming exactly its claims' devices, the
// model unchanged by an extender restart (SIGKILL). dra_rig_test.go builds
// the rig.
//
// Run it with scripts/e2e.sh. Environment:
//
//	K8S_TESTENV          path to the k8s-testenv binary (required)
//	FLEXTOPO_EXTENDER    path to the extender binary; default
//	                     <repo>/build/flextopo-extender; a relative path is
//	                     taken from the repository root
//	FLEXTOPO_EXTENDER_ARGS  extra extender arguments, split on spaces
//	FLEXTOPO_SCHEDULER_CONFIG  scheduler configuration to start from; default
//	                     <repo>/configs/scheduler-config.yaml
//	FLEXTOPO_E2E_INSECURE=1  write insecure-skip-tls-verify into the
//	                     kubeconfig instead of the generated CA
//	FLEXTOPO_E2E_KEEP=1  keep the work directory (logs, data) after a pass
//	FLEXTOPO_E2E_LOG_DIR copy the component logs there at the end
//	FLEXTOPO_E2E_REPORT  write the preemption comparison tables (also in the
//	                     test log) to this file; a relative path is taken
//	                     from the repository root
//	CI=true              a missing binary fails the run instead of skipping
//	FLEXTOPO_E2E_DRA_PODS  random pods of the DRA scenario (default 300)
//	FLEXTOPO_E2E_DRA_SEED  their seed (default 1)
package e2e
