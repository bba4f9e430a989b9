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
package e2e
