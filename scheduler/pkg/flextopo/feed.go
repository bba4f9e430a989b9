package flextopo

import (
	"context"
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"flextopo.dev/scheduler/internal/core"
)

// The model is fed from kube-scheduler's own informers (the framework
// handle's SharedInformerFactory): no second list and watch of the API
// server. Each object is handed to the C state as JSON, as the extender's
// watch hands it what the API server sent. The pod informer is the
// scheduler's: it leaves out pods that have finished (status.phase
// Succeeded or Failed), which the model would not count either.
//
// Each kind's first list is bracketed (core.Embed.ListBegin/ListEnd) so the
// model is built once from it, and the model answers only once every kind's
// handler has seen its list (core.Embed.SetSynced), as the extender answers
// only once its watch has listed.

type feeder struct {
	embed *core.Embed
	kind  core.Kind
	log   klog.Logger
}

func (f *feeder) apply(obj interface{}) {
	b, err := json.Marshal(obj)
	if err == nil {
		err = f.embed.Apply(f.kind, b)
	}
	if err != nil {
		f.log.Error(err, "flextopo: object not fed to the model", "kind", f.kind.String())
	}
}

func (f *feeder) remove(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	b, err := json.Marshal(obj)
	if err == nil {
		err = f.embed.Delete(f.kind, b)
	}
	if err != nil {
		f.log.Error(err, "flextopo: deletion not fed to the model", "kind", f.kind.String())
	}
	if pod, ok := obj.(*v1.Pod); ok {
		placed(pod.UID)
	}
	if f.kind == core.KindPod || f.kind == core.KindClaim {
		roomFreed(f.log)
	}
}

// deallocated: a ResourceClaim update that gives its devices back. On a
// DRA node the GPUs of a deleted pod are freed only when
// kube-controller-manager deallocates its claims, after the pod's deletion
// event, so a pod retried on that event can have been refused again.
func deallocated(old, obj interface{}) bool {
	before, ok1 := old.(*resourceapi.ResourceClaim)
	after, ok2 := obj.(*resourceapi.ResourceClaim)
	return ok1 && ok2 && before.Status.Allocation != nil && after.Status.Allocation == nil
}

func (f *feeder) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			f.apply(obj)
			if f.kind == core.KindNode {
				roomFreed(f.log)
			}
		},
		UpdateFunc: func(old, obj interface{}) {
			f.apply(obj)
			if deallocated(old, obj) {
				roomFreed(f.log)
			}
		},
		DeleteFunc: f.remove,
	}
}

// feed registers the handlers that feed `embed` on the handle's informers,
// and marks the model in sync once every kind's first list is in.
func feed(ctx context.Context, h fwk.Handle, embed *core.Embed) error {
	log := klog.FromContext(ctx)
	f := h.SharedInformerFactory()
	informers := map[core.Kind]cache.SharedIndexInformer{
		core.KindNode: f.Core().V1().Nodes().Informer(),
		core.KindPod:  f.Core().V1().Pods().Informer(),
		core.KindPDB:  f.Policy().V1().PodDisruptionBudgets().Informer(),
	}
	if embed.DRA() && draServed(h) {
		informers[core.KindSlice] = f.Resource().V1().ResourceSlices().Informer()
		informers[core.KindClaim] = f.Resource().V1().ResourceClaims().Informer()
		informers[core.KindClass] = f.Resource().V1().DeviceClasses().Informer()
	}
	var synced []cache.InformerSynced
	var kinds []core.Kind
	for kind, inf := range informers {
		embed.ListBegin(kind)
		reg, err := inf.AddEventHandler((&feeder{embed: embed, kind: kind, log: log}).handler())
		if err != nil {
			return err
		}
		synced = append(synced, reg.HasSynced)
		kinds = append(kinds, kind)
	}
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		for _, kind := range kinds {
			embed.ListEnd(kind)
		}
		embed.SetSynced(true)
		log.Info("flextopo: model in sync with the scheduler's informers", "kinds", len(kinds))
	}()
	return nil
}

// draServed says whether the API server serves resource.k8s.io/v1: an
// informer of a group it does not serve would never sync, and hold the
// model out of sync for good.
func draServed(h fwk.Handle) bool {
	_, err := h.ClientSet().Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1")
	return err == nil
}
