package agent

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"flextopo.dev/node/alloc"
)

// TestPublisherRetriesSoon: the agent may start before kubelet has
// registered its Node. The first Publish then fails, and the topology must
// follow within seconds of the Node, not an interval (a minute by default)
// later.
func TestPublisherRetriesSoon(t *testing.T) {
	const topology = `{"version":1,"sockets":[]}`
	client := fake.NewSimpleClientset()
	p := &Publisher{Node: "n1", Client: client, Command: []string{"echo", topology},
		Log: quietLog(), Metrics: NewMetrics(nil)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx, time.Hour)
	}()
	defer func() {
		cancel()
		<-done
	}()

	time.Sleep(200 * time.Millisecond) // the first Publish finds no Node
	registered := time.Now()
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Current is set after the patch returns, so the annotation can be seen
	// a moment before it: wait for both.
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := n.Annotations[alloc.TopologyAnnotation]
		if got == topology && p.Current() == topology {
			t.Logf("published %s after the Node was registered", time.Since(registered).Round(10*time.Millisecond))
			break
		}
		if time.Since(registered) > 10*time.Second {
			t.Fatalf("no topology 10 s after the Node was registered (annotation %q, Current() %q)", got, p.Current())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
