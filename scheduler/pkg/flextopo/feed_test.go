package flextopo

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"flextopo.dev/scheduler/internal/core"
)

// activator records the pods moved back to the active queue; the rest of
// the handle is never called here.
type activator struct {
	fwk.Handle
	moved []string
}

func (a *activator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for key := range pods {
		a.moved = append(a.moved, key)
	}
}

func claim(allocated bool, reservedFor ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: "ml", UID: "claim-uid"}}
	if allocated {
		c.Status.Allocation = &resourceapi.AllocationResult{}
	}
	for _, name := range reservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: name})
	}
	return c
}

// A pod flextopo refused waits until the model frees room. On a DRA node
// that is when a claim is deallocated or deleted, after its pods' deletion
// events: each of those moves the pod back, and no other claim update does.
func TestWaitingPodsMoveWhenAClaimFreesItsDevices(t *testing.T) {
	embed, err := core.New("")
	if err != nil {
		t.Fatal(err)
	}
	h := claimHandler(embed)
	waiter := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "urgent", Namespace: "ml", UID: "urgent-uid"}}
	for _, step := range []struct {
		what     string
		event    func(cache.ResourceEventHandler)
		wantMove bool
	}{
		{"allocated", func(e cache.ResourceEventHandler) { e.OnUpdate(claim(false), claim(true)) }, false},
		{"reserved for a pod", func(e cache.ResourceEventHandler) { e.OnUpdate(claim(true), claim(true, "a")) }, false},
		{"its pod gone, still allocated", func(e cache.ResourceEventHandler) { e.OnUpdate(claim(true, "a"), claim(true)) }, false},
		{"deallocated", func(e cache.ResourceEventHandler) { e.OnUpdate(claim(true), claim(false)) }, true},
		{"deleted", func(e cache.ResourceEventHandler) { e.OnDelete(claim(true)) }, true},
	} {
		act := &activator{}
		placed(waiter.UID)
		wait(act, waiter)
		step.event(h)
		if moved := len(act.moved) == 1 && act.moved[0] == "ml/urgent"; moved != step.wantMove {
			t.Errorf("claim %s: moved %v, want a move: %v", step.what, act.moved, step.wantMove)
		}
	}
	placed(waiter.UID)
}

// claimHandler is the ResourceClaim informer's handler, as feed registers it.
func claimHandler(embed *core.Embed) cache.ResourceEventHandler {
	return (&feeder{embed: embed, kind: core.KindClaim, log: klog.Background()}).handler()
}
