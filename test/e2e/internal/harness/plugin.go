package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// PluginScheduler is a flextopo-scheduler (kube-scheduler with flextopo's
// framework plugins, scheduler/) that one test starts beside the run's
// kube-scheduler, for pods of its own schedulerName.
type PluginScheduler struct {
	Name          string
	SchedulerName string
	DebugURL      string // flextopo's debug API and /metrics (debugListen)
	Proc          *Process
}

// PluginConfigSource is the configuration flextopo-scheduler starts from.
func (c *Cluster) PluginConfigSource() string {
	return filepath.Join(c.RepoRoot, "configs", "scheduler-plugin-config.yaml")
}

// StartPluginScheduler starts flextopo-scheduler `bin`, named name, from
// configs/scheduler-plugin-config.yaml with this run's kubeconfig, one
// profile for schedulerName, and the FlexTopo plugin's configFile holding
// the keys of flextopoCfg (configs/flextopo.yaml) besides debugListen.
// mutate, when not nil, changes the configuration (a map as read from
// YAML) before it is written. It waits until kube-scheduler is ready and
// flextopo's model is in sync (its /readyz), and stops the process when
// the test ends.
func (c *Cluster) StartPluginScheduler(t *testing.T, name, bin, schedulerName string,
	flextopoCfg map[string]interface{}, mutate func(cfg map[string]interface{}) error) *PluginScheduler {
	t.Helper()
	dir, err := c.Dir(name)
	if err != nil {
		t.Fatal(err)
	}
	debugPort, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ps := &PluginScheduler{Name: name, SchedulerName: schedulerName, DebugURL: "http://" + HostPort(debugPort)}
	ftCfg := map[string]interface{}{"debugListen": HostPort(debugPort), "logLevel": "debug"}
	for k, v := range flextopoCfg {
		ftCfg[k] = v
	}
	ftPath := filepath.Join(dir, "flextopo.yaml")
	if err := writeYAML(ftPath, ftCfg); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.pluginConfig(schedulerName, ftPath)
	if err == nil && mutate != nil {
		err = mutate(cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ps.Proc, err = c.runSchedulerBin(bin, nil, name, raw)
	if ps.Proc != nil {
		t.Cleanup(func() {
			ps.Proc.Stop(15 * time.Second)
			if t.Failed() {
				t.Logf("%s log (%s):\n%s", name, ps.Proc.LogPath, TailFile(ps.Proc.LogPath, 150))
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	err = WaitHTTP(ps.Proc, HTTPClient(nil), ps.DebugURL+"/readyz", nil, 60*time.Second, func(code int, _ string) bool {
		return code == 200
	})
	if err != nil {
		t.Fatalf("%s: flextopo's model: %v", name, err)
	}
	return ps
}

// pluginConfig reads the plugin configuration and points it at this run:
// the kubeconfig, the profile's schedulerName and flextopo's configFile.
func (c *Cluster) pluginConfig(schedulerName, flextopoCfg string) (map[string]interface{}, error) {
	src := c.PluginConfigSource()
	raw, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	var cfg map[string]interface{}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	cc, _ := cfg["clientConnection"].(map[string]interface{})
	if cc == nil {
		return nil, fmt.Errorf("%s: no clientConnection", src)
	}
	cc["kubeconfig"] = c.Kubeconfig
	profiles, _ := cfg["profiles"].([]interface{})
	if len(profiles) != 1 {
		return nil, fmt.Errorf("%s: want one profile, have %d", src, len(profiles))
	}
	profile := profiles[0].(map[string]interface{})
	profile["schedulerName"] = schedulerName
	pcs, _ := profile["pluginConfig"].([]interface{})
	for _, pc := range pcs {
		m := pc.(map[string]interface{})
		if m["name"] == "FlexTopo" {
			m["args"].(map[string]interface{})["configFile"] = flextopoCfg
			return cfg, nil
		}
	}
	return nil, fmt.Errorf("%s: no pluginConfig for FlexTopo", src)
}

func writeYAML(path string, v interface{}) error {
	raw, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}
