// Package e2e is the flextopo end-to-end test: it starts etcd, kube-apiserver,
// kube-scheduler (all from the k8s-testenv binary built by scripts/e2e.sh) and
// the flextopo extender on 127.0.0.1, creates nodes through the API (and one
// real node with kubelet, containerd and runc) and checks where the scheduler,
// guided by the extender, places GPU pods.
//
// The preemption scenarios (preempt_test.go) also start a second
// kube-scheduler, profile "flextopo-nopreempt", from the same configuration
// without preemptVerb, to compare flextopo's victims with kube-scheduler's.
//
// The preemption study is a package of its own, study/. Both start their
// components through internal/harness and read and write flextopo's
// annotations through internal/flextopo.
//
// Run it with scripts/e2e.sh. README.md in this directory lists every
// scenario with what it proves, how to run it alone, how long it takes, and
// the environment the tests read (K8S_TESTENV, FLEXTOPO_EXTENDER, CI, ...).
package e2e
