package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Env is what a test binary of this module runs with, found by its
// TestMain before any test runs.
type Env struct {
	Name     string // the prefix of its messages: "e2e", "study"
	RepoRoot string
	Testenv  string // the k8s-testenv binary (K8S_TESTENV)
	// Extender is the flextopo-extender binary (ExtenderBinary), "" when a
	// local run lacks it; SkipReason then says why.
	Extender   string
	SkipReason string
	WorkDir    string // a fresh directory for logs and data
}

// Setup finds the repository root (root, relative to the test's package
// directory), k8s-testenv and the extender, and makes the work directory.
// When ok is false the binary exits with code and runs no test: in -short
// mode, without k8s-testenv (a skip, or with CI=true a failure), or when
// the work directory cannot be made. Without an extender a local run goes
// on and what needs it skips (skips names it, for the message); with
// CI=true it fails. Call it after flag.Parse.
func Setup(name, root, skips string) (e *Env, code int, ok bool) {
	if testing.Short() {
		fmt.Println(name + ": skipped in -short mode")
		return nil, 0, false
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return nil, 1, false
	}
	e = &Env{Name: name, RepoRoot: abs}

	e.Testenv = os.Getenv("K8S_TESTENV")
	if e.Testenv == "" || !IsExecutable(e.Testenv) {
		msg := fmt.Sprintf("K8S_TESTENV=%q is not an executable k8s-testenv binary; run scripts/e2e.sh, which builds it", e.Testenv)
		if IsCI() {
			fmt.Fprintln(os.Stderr, name+": FAIL:", msg)
			return nil, 1, false
		}
		fmt.Println(name+": SKIP:", msg)
		return nil, 0, false
	}

	e.Extender = ExtenderBinary(abs)
	if !IsExecutable(e.Extender) {
		msg := fmt.Sprintf("extender binary %s not found or not executable (set FLEXTOPO_EXTENDER or build it first)", e.Extender)
		if IsCI() {
			fmt.Fprintln(os.Stderr, name+": FAIL:", msg)
			return nil, 1, false
		}
		fmt.Printf("%s: SKIP %s: %s\n", name, skips, msg)
		e.SkipReason = msg
		e.Extender = ""
	}

	if e.WorkDir, err = os.MkdirTemp("", "flextopo-"+name+"-"); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return nil, 1, false
	}
	fmt.Println(name+": work directory", e.WorkDir)
	return e, 0, true
}

// Finish removes the work directory after a run that passed (code 0),
// unless FLEXTOPO_E2E_KEEP is set; otherwise it says where it is.
func (e *Env) Finish(code int) {
	if code == 0 && !EnvBool("FLEXTOPO_E2E_KEEP") {
		os.RemoveAll(e.WorkDir)
	} else {
		fmt.Println(e.Name+": kept work directory", e.WorkDir)
	}
}
