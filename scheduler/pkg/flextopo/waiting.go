package flextopo

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// The model is fed by handlers of its own on kube-scheduler's informers,
// which may run after kube-scheduler's handlers for the same event. A pod
// flextopo refused is requeued on the event that frees room (a pod
// deleted), and its retry can then read the model from before that event
// and be refused again, with no further event to requeue it. So the pods
// flextopo left unschedulable wait here, and once the model has applied
// something that frees room (a pod gone, a node added, a ResourceClaim
// deallocated or deleted, an assumption forgotten) they are moved back to
// the active queue (fwk.PodActivator), which also catches a pod still in
// flight.

type waiter struct {
	h   fwk.Handle
	pod *v1.Pod
}

var waiting = struct {
	sync.Mutex
	pods map[types.UID]waiter
}{pods: map[types.UID]waiter{}}

// wait records a pod whose cycle ended without a node.
func wait(h fwk.Handle, pod *v1.Pod) {
	waiting.Lock()
	waiting.pods[pod.UID] = waiter{h: h, pod: pod}
	waiting.Unlock()
}

// placed forgets a pod that got a node, or is gone.
func placed(uid types.UID) {
	waiting.Lock()
	delete(waiting.pods, uid)
	waiting.Unlock()
}

// roomFreed moves every waiting pod back to the active queue.
func roomFreed(log klog.Logger) {
	waiting.Lock()
	byHandle := map[fwk.Handle]map[string]*v1.Pod{}
	for _, w := range waiting.pods {
		if byHandle[w.h] == nil {
			byHandle[w.h] = map[string]*v1.Pod{}
		}
		byHandle[w.h][w.pod.Namespace+"/"+w.pod.Name] = w.pod
	}
	waiting.pods = map[types.UID]waiter{}
	waiting.Unlock()
	for h, pods := range byHandle {
		h.Activate(log, pods)
	}
}
