package flextopo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestArgsDefaults(t *testing.T) {
	a, err := decodeArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if *a.MinCandidateNodesPercentage != 10 || *a.MinCandidateNodesAbsolute != 100 || a.ConfigFile != "" {
		t.Errorf("defaults %+v", a)
	}
}

func TestArgsDecodeAndValidate(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "flextopo.yaml")
	if err := os.WriteFile(cfg, []byte("policy: distributed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := func(s string) runtime.Object {
		return &runtime.Unknown{Raw: []byte(s), ContentType: runtime.ContentTypeJSON}
	}
	a, err := decodeArgs(raw(`{"configFile":"` + cfg + `","minCandidateNodesAbsolute":5}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.ConfigFile != cfg || *a.MinCandidateNodesAbsolute != 5 || *a.MinCandidateNodesPercentage != 10 {
		t.Errorf("decoded %+v", a)
	}
	for _, c := range []struct{ args, want string }{
		{`{"configFile":"/nonexistent/flextopo.yaml"}`, "configFile"},
		{`{"minCandidateNodesPercentage":101}`, "minCandidateNodesPercentage"},
		{`{"minCandidateNodesPercentage":0,"minCandidateNodesAbsolute":0}`, "minCandidateNodes"},
		{`{"configFile":7}`, "cannot unmarshal"},
	} {
		if _, err := decodeArgs(raw(c.args)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("args %s: error %v, want one naming %s", c.args, err, c.want)
		}
	}
}
