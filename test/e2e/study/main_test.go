package study

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"flextopo.dev/e2e/internal/harness"
)

// env is what the study runs with: the repository root, k8s-testenv, the
// extender and a work directory (harness.Setup).
var env *harness.Env

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	e, code, ok := harness.Setup("study", filepath.Join("..", "..", ".."), "the study")
	if !ok {
		return code
	}
	env = e
	code = m.Run()
	e.Finish(code)
	return code
}

// requireExtender skips the test (local runs only) when there is no
// extender; each arm of the study starts extenders of its own.
func requireExtender(t *testing.T) *harness.Env {
	t.Helper()
	if env.Extender == "" {
		t.Skip(env.SkipReason)
	}
	return env
}
