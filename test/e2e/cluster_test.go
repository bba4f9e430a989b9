package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"flextopo.dev/e2e/internal/harness"
)

var (
	env *harness.Cluster
	// skipReason is set when a local run lacks the extender: the control
	// plane tests still run, the placement scenarios skip.
	skipReason string
	// setupErr is set when the cluster could not be started: every test fails
	// with it.
	setupErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	e, code, ok := harness.Setup("e2e", filepath.Join("..", ".."), "placement scenarios")
	if !ok {
		return code
	}
	skipReason = e.SkipReason

	c := &harness.Cluster{WorkDir: e.WorkDir, RepoRoot: e.RepoRoot}
	start := time.Now()
	setupErr = c.Start(e.Testenv, e.Extender)
	if setupErr == nil {
		fmt.Printf("e2e: cluster up in %s (apiserver %s, extender %s)\n",
			time.Since(start).Round(100*time.Millisecond), c.APIURL, orNone(c.ExtenderURL))
		env = c
	} else {
		fmt.Fprintln(os.Stderr, "e2e: cluster setup failed:", setupErr)
	}

	code = 1
	if setupErr == nil {
		code = m.Run()
	}
	c.Stop()

	if code != 0 {
		c.DumpLogs()
	}
	if dir := os.Getenv("FLEXTOPO_E2E_LOG_DIR"); dir != "" {
		c.CopyLogs(dir)
	}
	e.Finish(code)
	return code
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// requireCluster fails the test when setup failed.
func requireCluster(t *testing.T) *harness.Cluster {
	t.Helper()
	if env == nil {
		t.Fatalf("cluster not available: %v", setupErr)
	}
	return env
}

// requireExtender also skips (local runs only) when there is no extender.
func requireExtender(t *testing.T) *harness.Cluster {
	t.Helper()
	c := requireCluster(t)
	if c.Extender == nil {
		t.Skip(skipReason)
	}
	if err := c.Extender.CheckAlive(); err != nil {
		t.Fatal(err)
	}
	return c
}
