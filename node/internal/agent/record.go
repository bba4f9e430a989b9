package agent

import (
	"sync"

	"flextopo.dev/node/internal/alloc"
)

// PodKey names a pod.
type PodKey struct{ Namespace, Name, UID string }

// Record keeps what the NRI plugin gave each container, per pod, until the
// reporter writes it. It signals changes on C.
type Record struct {
	mu   sync.Mutex
	pods map[string]map[string]alloc.Holding // uid -> container -> holding
	C    chan struct{}
}

// NewRecord returns an empty record.
func NewRecord() *Record {
	return &Record{pods: map[string]map[string]alloc.Holding{}, C: make(chan struct{}, 1)}
}

func (r *Record) kick() {
	select {
	case r.C <- struct{}{}:
	default:
	}
}

// Applied records the holding of one container.
func (r *Record) Applied(k PodKey, container string, h alloc.Holding) {
	r.mu.Lock()
	if r.pods[k.UID] == nil {
		r.pods[k.UID] = map[string]alloc.Holding{}
	}
	r.pods[k.UID][container] = h
	r.mu.Unlock()
	r.kick()
}

// Removed drops one container (it may be created again, e.g. a restart).
func (r *Record) Removed(k PodKey, container string) {
	r.mu.Lock()
	delete(r.pods[k.UID], container)
	r.mu.Unlock()
}

// Forget drops the pod.
func (r *Record) Forget(k PodKey) {
	r.mu.Lock()
	delete(r.pods, k.UID)
	r.mu.Unlock()
}

// Containers returns the recorded holdings of a pod, nil when none.
func (r *Record) Containers(uid string) map[string]alloc.Holding {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pods[uid]) == 0 {
		return nil
	}
	out := make(map[string]alloc.Holding, len(r.pods[uid]))
	for c, h := range r.pods[uid] {
		out[c] = h
	}
	return out
}
