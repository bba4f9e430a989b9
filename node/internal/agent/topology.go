package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"flextopo.dev/node/alloc"
)

// Publisher keeps the node's flextopo.io/topology annotation equal to what
// discovery (flextopo-discover: hwloc + NVML, with the device plugin's
// sharing configuration) reports: at start and whenever it changes (MIG
// reconfiguration, a new sharing configuration), polled every interval.
type Publisher struct {
	Node    string
	Client  kubernetes.Interface
	Command []string // e.g. flextopo-discover --sharing-config FILE
	Log     *slog.Logger
	Metrics *Metrics

	mu   sync.Mutex
	last string // the annotation value last published or found
}

// Current returns the topology last published ("" before the first).
func (p *Publisher) Current() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// firstRetry is the wait after a first failed Publish; it doubles with each
// failure in a row, up to Run's interval.
const firstRetry = time.Second

// Run publishes now and then every interval. A failed Publish (the Node not
// registered yet, the API server restarting, discovery failing) is retried
// after firstRetry, doubling up to interval, so that a transient error does
// not leave the node without its topology, and so unschedulable for
// flextopo, for a whole interval.
func (p *Publisher) Run(ctx context.Context, interval time.Duration) {
	retry := firstRetry
	for {
		wait := interval
		if err := p.Publish(ctx); err != nil {
			wait = min(retry, interval)
			retry = min(2*retry, interval)
			p.Log.Warn("topology not published; retrying", "err", err, "in", wait)
		} else {
			retry = firstRetry
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Publish runs discovery once and writes the annotation when it differs from
// the node's.
func (p *Publisher) Publish(ctx context.Context) error {
	value, err := p.discover(ctx)
	if err != nil {
		return err
	}
	node, err := p.Client.CoreV1().Nodes().Get(ctx, p.Node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", p.Node, err)
	}
	if node.Annotations[alloc.TopologyAnnotation] != value {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{alloc.TopologyAnnotation: value}}})
		if _, err = p.Client.CoreV1().Nodes().Patch(ctx, p.Node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			p.Metrics.patchErrors.Inc()
			return fmt.Errorf("patch node %s: %w", p.Node, err)
		}
		p.Metrics.topologyPublished.Inc()
		p.Log.Info("published topology", "node", p.Node, "bytes", len(value))
	}
	p.mu.Lock()
	p.last = value
	p.mu.Unlock()
	return nil
}

func (p *Publisher) discover(ctx context.Context) (string, error) {
	if len(p.Command) == 0 {
		return "", fmt.Errorf("no discovery command")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, p.Command[0], p.Command[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %v: %s", strings.Join(p.Command, " "), err, strings.TrimSpace(errb.String()))
	}
	for _, w := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if w != "" {
			p.Log.Debug("discovery", "warning", w)
		}
	}
	value := strings.TrimSpace(out.String())
	if !json.Valid([]byte(value)) {
		return "", fmt.Errorf("%s printed no JSON annotation", p.Command[0])
	}
	return value, nil
}
