package agent

import (
	"sync"

	"flextopo.dev/node/alloc"
)

// PodKey names a pod.
type PodKey struct{ Namespace, Name, UID string }

// Entry is what the NRI plugin gave one container and what the runtime
// reported it had.
type Entry struct {
	alloc.Holding
	// CDIDevices are the CDI devices the runtime reported for the container
	// (NRI's Container.CDIDevices), nil when it reported none: containerd
	// fills them from 2.3 on, from the CRI config kubelet sent.
	CDIDevices []string
}

// Record keeps what the NRI plugin gave each container, per pod, until the
// reporter writes it. It signals changes on C.
type Record struct {
	mu   sync.Mutex
	pods map[string]map[string]Entry // uid -> container -> entry
	C    chan struct{}
}

// NewRecord returns an empty record.
func NewRecord() *Record {
	return &Record{pods: map[string]map[string]Entry{}, C: make(chan struct{}, 1)}
}

func (r *Record) kick() {
	select {
	case r.C <- struct{}{}:
	default:
	}
}

// Applied records one container.
func (r *Record) Applied(k PodKey, container string, e Entry) {
	r.mu.Lock()
	if r.pods[k.UID] == nil {
		r.pods[k.UID] = map[string]Entry{}
	}
	r.pods[k.UID][container] = e
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

// Containers returns the recorded entries of a pod, nil when none.
func (r *Record) Containers(uid string) map[string]Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pods[uid]) == 0 {
		return nil
	}
	out := make(map[string]Entry, len(r.pods[uid]))
	for c, e := range r.pods[uid] {
		out[c] = e
	}
	return out
}
