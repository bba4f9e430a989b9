// Package study is the preemption study: the FGD paper's comparison at
// cluster scale with real components. kwok-managed nodes (KWOK, built by
// scripts/e2e.sh), a fresh control plane per arm, and a compressed day of
// co-located work under three arms (study_test.go).
//
// Run it with scripts/preemption-study.sh, or scripts/e2e.sh for
// TestPreemptionStudySmall. Environment, besides K8S_TESTENV,
// FLEXTOPO_EXTENDER, FLEXTOPO_SCHEDULER_CONFIG, FLEXTOPO_E2E_KEEP and CI,
// read as in the e2e package:
//
//	KWOK                 path to the kwok binary; without it the study
//	                     tests skip
//	FLEXTOPO_STUDY       run TestPreemptionStudy: "nodes=1000,wall=360s,
//	                     seed=1,source=synthetic|openb"; FLEXTOPO_STUDY_OUT
//	                     is the folder for its table and plots, FLEXTOPO_OPENB
//	                     the trace's pod list
//	FLEXTOPO_STUDY_DEBUG set: log every preemptor of an arm
package study
