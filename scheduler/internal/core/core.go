// Package core is flextopo's C core (include/flextopo/embed.h) as Go
// values: the only package of the scheduler that uses cgo. Every question
// is answered in C by the code that answers the extender's verbs; this
// package moves bytes across and turns error codes into Go errors.
//
// Linking: the static libraries of a CMake build of the repository
// (libft_app.a ... libft_base.a) are found through CGO_LDFLAGS=-L<build>,
// and their dependencies through pkg-config; scripts/build-scheduler.sh sets
// both.
//
// Errors: the C core keeps the last error message per thread, and a
// goroutine may move to another thread between two cgo calls, so each call
// goes through a shim in the preamble that copies the message out within
// the same call.
package core

/*
#cgo CFLAGS: -I${SRCDIR}/../../../include
#cgo LDFLAGS: -lft_app -lft_server -lft_kube -lft_config -lft_codec -lft_core -lft_base -lpthread -lm
#cgo pkg-config: libmicrohttpd gnutls libcjson libcurl yaml-0.1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <flextopo/embed.h>
#include <flextopo/error.h>
#include <flextopo/frag.h>

#define ERR_MAX 512

// scripts/build-scheduler.sh defines FT_CORE_LIBS_DIGEST, a digest of the
// static libraries linked below. go's cache does not look into those
// libraries, and it relinks a binary only when a package's compiled output
// changes: a flag alone is not enough, this string in the object is.
#ifdef FT_CORE_LIBS_DIGEST
#define FT_STR2(x) #x
#define FT_STR(x) FT_STR2(x)
__attribute__((used)) static const char ft_core_libs_digest[] =
	FT_STR(FT_CORE_LIBS_DIGEST);
#endif

static int took(int rc, char *err)
{
	if (rc < 0)
		snprintf(err, ERR_MAX, "%s", ft_error_last());
	return rc;
}

static int shim_new(ft_embed_t **out, const char *config, char *err)
{
	return took(ft_embed_new(out, config), err);
}

static int shim_serve(ft_embed_t *e, char *err)
{
	return took(ft_embed_serve(e), err);
}

static int shim_feed(ft_embed_t *e, int del, int kind, const char *json,
		     size_t len, char *err)
{
	return took(del ? ft_embed_delete(e, (ft_kind_t)kind, json, len)
			: ft_embed_apply(e, (ft_kind_t)kind, json, len),
		    err);
}

static int shim_pod_new(ft_embed_pod_t **out, ft_embed_t *e, const char *json,
			size_t len, char *err)
{
	return took(ft_embed_pod_new(out, e, json, len), err);
}

static int shim_rank(ft_embed_pod_t *p, const char *names, unsigned n,
		     int64_t *ranks, char *err)
{
	return took(ft_embed_rank(p, names, n, ranks), err);
}

static int shim_assume(ft_embed_pod_t *p, const char *node, char **out,
		       char *err)
{
	return took(ft_embed_assume(p, node, out), err);
}

static int shim_assume_dra(ft_embed_t *e, const char *pod, size_t pod_len,
			   const char *node, const char *claims,
			   size_t claims_len, char **out, char *err)
{
	return took(ft_embed_assume_dra(e, pod, pod_len, node, claims,
					claims_len, out),
		    err);
}

static int shim_victims(ft_embed_victims_t *out, ft_embed_pod_t *p,
			const char *node, const char *proposed, unsigned n,
			unsigned pdb, char *err)
{
	return took(ft_embed_victims(out, p, node, proposed, n, pdb), err);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Kind is the kind of an API object the informers feed (ft_kind_t).
type Kind int

const (
	KindNode  Kind = C.FT_KIND_NODE
	KindPod   Kind = C.FT_KIND_POD
	KindPDB   Kind = C.FT_KIND_PDB
	KindSlice Kind = C.FT_KIND_SLICE
	KindClaim Kind = C.FT_KIND_CLAIM
	KindClass Kind = C.FT_KIND_CLASS
)

// Fit is a filter verdict (ft_fit_t).
type Fit int

const (
	Fits              Fit = C.FT_FIT
	Unfit             Fit = C.FT_UNFIT
	UnfitUnresolvable Fit = C.FT_UNFIT_UNRESOLVABLE
	RankNone              = int64(-1) // FT_RANK_NONE: no placement there
)

// Error is a failure of the C core: its code (error.h) and message.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return e.Message }

// IsNotFound says whether err is the core's FT_ENOTFOUND (error.h): a node
// or object the model does not hold.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == int(C.FT_ENOTFOUND)
}

// IsFreed says whether err is that of a call on a Pod already freed.
func IsFreed(err error) bool { return errors.Is(err, errFreed) }

// scratch is C memory for what C writes back (error messages, filter
// reasons): a Go array whose address goes to C is moved to the heap at
// every call, which at one Filter call per node was most of the plugin's
// garbage. The buffers are reused through a pool and freed when the pool
// drops them.
type scratch struct{ p *C.char }

var scratchPool = sync.Pool{New: func() any {
	s := &scratch{p: (*C.char)(C.malloc(C.ERR_MAX))}
	runtime.AddCleanup(s, func(p *C.char) { C.free(unsafe.Pointer(p)) }, s.p)
	return s
}}

// errBuf receives the C core's message of one call; release it after.
type errBuf struct{ s *scratch }

func newErrBuf() errBuf { return errBuf{scratchPool.Get().(*scratch)} }

func (b errBuf) ptr() *C.char { return b.s.p }

func (b errBuf) release() { scratchPool.Put(b.s) }

func (b errBuf) err(rc C.int) error {
	if rc >= 0 {
		return nil
	}
	return &Error{Code: int(rc), Message: C.GoString(b.ptr())}
}

func bytesPtr(b []byte) *C.char {
	if len(b) == 0 {
		return nil
	}
	return (*C.char)(unsafe.Pointer(&b[0]))
}

// joined is names back to back, each NUL-terminated, as embed.h takes lists.
func joined(names []string) []byte {
	n := 0
	for _, s := range names {
		n += len(s) + 1
	}
	out := make([]byte, 0, n+1)
	for _, s := range names {
		out = append(out, s...)
		out = append(out, 0)
	}
	return append(out, 0)
}

// Embed is one flextopo state inside the scheduler process.
type Embed struct {
	p *C.ft_embed_t
}

// New makes the state from flextopo's configuration file (configs/
// flextopo.yaml; "" for the defaults).
func New(configFile string) (*Embed, error) {
	e := newErrBuf()
	defer e.release()
	var p *C.ft_embed_t
	var cfg *C.char
	if configFile != "" {
		cfg = C.CString(configFile)
		defer C.free(unsafe.Pointer(cfg))
	}
	if err := e.err(C.shim_new(&p, cfg, e.ptr())); err != nil {
		return nil, err
	}
	return &Embed{p: p}, nil
}

// Serve starts the configuration's listeners (ft_embed_serve): the debug
// API and /metrics on debugListen, /metrics to reviewed bearer tokens on
// metricsListen, and the admission webhook on webhookListen; each is off
// when its address is unset.
func (m *Embed) Serve() error {
	e := newErrBuf()
	defer e.release()
	return e.err(C.shim_serve(m.p, e.ptr()))
}

// Apply feeds an added or updated object (JSON of its API type).
func (m *Embed) Apply(kind Kind, obj []byte) error { return m.feed(0, kind, obj) }

// Delete feeds an object's deletion.
func (m *Embed) Delete(kind Kind, obj []byte) error { return m.feed(1, kind, obj) }

func (m *Embed) feed(del C.int, kind Kind, obj []byte) error {
	e := newErrBuf()
	defer e.release()
	return e.err(C.shim_feed(m.p, del, C.int(kind), bytesPtr(obj), C.size_t(len(obj)), e.ptr()))
}

// ListBegin and ListEnd bracket the first list of a kind: the model is
// published once, at the end.
func (m *Embed) ListBegin(kind Kind) { C.ft_embed_list_begin(m.p, C.ft_kind_t(kind)) }
func (m *Embed) ListEnd(kind Kind)   { C.ft_embed_list_end(m.p, C.ft_kind_t(kind)) }

// SetSynced says whether the informers have delivered their first lists.
func (m *Embed) SetSynced(synced bool) { C.ft_embed_set_synced(m.p, C.bool(synced)) }

// DRA says whether the configuration reads ResourceSlices and claims.
func (m *Embed) DRA() bool { return bool(C.ft_embed_dra(m.p)) }

// AnnotationPrefix is the configured prefix of flextopo's annotations.
func (m *Embed) AnnotationPrefix() string { return C.GoString(C.ft_embed_annotation_prefix(m.p)) }

// Forget drops the assumption of pod uid (Unreserve).
func (m *Embed) Forget(uid string) {
	s := C.CString(uid)
	defer C.free(unsafe.Pointer(s))
	C.ft_embed_forget(m.p, s)
}

// AssumeDRA assumes a pod on a DRA node at bind, around the devices of its
// claims (a JSON array of ResourceClaims), and returns the annotation.
func (m *Embed) AssumeDRA(pod []byte, node string, claims []byte) (string, error) {
	e := newErrBuf()
	defer e.release()
	var out *C.char
	n := C.CString(node)
	defer C.free(unsafe.Pointer(n))
	rc := C.shim_assume_dra(m.p, bytesPtr(pod), C.size_t(len(pod)), n, bytesPtr(claims), C.size_t(len(claims)), &out, e.ptr())
	if err := e.err(rc); err != nil {
		return "", err
	}
	defer C.free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

// ScoresOfRanks spreads the ranks of one cycle over 0..max
// (ft_scores_of_ranks): the best nodes get max.
func ScoresOfRanks(ranks []int64, max int) []int64 {
	out := make([]int64, len(ranks))
	if len(ranks) == 0 {
		return out
	}
	scores := make([]C.int, len(ranks))
	C.ft_scores_of_ranks(&scores[0], (*C.int64_t)(unsafe.Pointer(&ranks[0])), C.unsigned(len(ranks)), C.int(max))
	for i, s := range scores {
		out[i] = int64(s)
	}
	return out
}

// handle owns one C pod handle; freed once, explicitly or by the garbage
// collector, never while a call holds it.
type handle struct {
	mu sync.RWMutex
	p  *C.ft_embed_pod_t
}

func (h *handle) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p != nil {
		C.ft_embed_pod_free(h.p)
		h.p = nil
	}
}

// Pod is one pod of one scheduling cycle: decoded once, with the model as
// it was when the cycle began. Its methods may be called from several
// goroutines at once.
type Pod struct {
	h *handle
}

// errFreed is returned by the methods of a Pod after Free.
var errFreed = errors.New("flextopo: pod handle already freed")

// NewPod decodes a v1 Pod (JSON) for one scheduling cycle; an *Error with
// code FT_EUNAVAIL (error.h) while the model is not in sync yet.
func (m *Embed) NewPod(pod []byte) (*Pod, error) {
	e := newErrBuf()
	defer e.release()
	var p *C.ft_embed_pod_t
	if err := e.err(C.shim_pod_new(&p, m.p, bytesPtr(pod), C.size_t(len(pod)), e.ptr())); err != nil {
		return nil, err
	}
	out := &Pod{h: &handle{p: p}}
	runtime.AddCleanup(out, func(h *handle) { h.free() }, out.h)
	return out, nil
}

// Free releases the handle now; later calls answer errFreed or nothing.
func (p *Pod) Free() { p.h.free() }

// with runs fn with the C handle held; false when it is freed.
func (p *Pod) with(fn func(c *C.ft_embed_pod_t)) bool {
	p.h.mu.RLock()
	defer p.h.mu.RUnlock()
	if p.h.p == nil {
		return false
	}
	fn(p.h.p)
	return true
}

// WantsTopology says whether the pod needs the model to be filtered
// (devices, pinned CPUs, an affinity or capabilities). Every pod is
// ranked.
func (p *Pod) WantsTopology() bool {
	wants := false
	p.with(func(c *C.ft_embed_pod_t) { wants = bool(C.ft_embed_pod_wants_topology(c)) })
	return wants
}

// Filter is the verdict on one node, and why not. removed lists the uids of
// pods the preemption dry run took off the node.
func (p *Pod) Filter(node string, removed []byte, nRemoved int) (Fit, string) {
	reason := newErrBuf()
	defer reason.release()
	fit := UnfitUnresolvable
	msg := errFreed.Error()
	p.with(func(c *C.ft_embed_pod_t) {
		f := C.ft_embed_filter(c, (*C.char)(unsafe.Pointer(unsafe.StringData(node))), C.size_t(len(node)),
			bytesPtr(removed), C.unsigned(nRemoved), reason.ptr(), C.ERR_MAX)
		fit, msg = Fit(f), ""
		if Fit(f) != Fits {
			msg = C.GoString(reason.ptr())
		}
	})
	return fit, msg
}

// RemovedList is uids as Filter takes them.
func RemovedList(uids []string) []byte { return joined(uids) }

// Rank ranks every node in one call: ranks[i] for nodes[i], RankNone where
// the pod cannot go.
func (p *Pod) Rank(nodes []string) ([]int64, error) {
	ranks := make([]int64, len(nodes)+1)
	names := joined(nodes)
	err := errFreed
	p.with(func(c *C.ft_embed_pod_t) {
		e := newErrBuf()
		defer e.release()
		err = e.err(C.shim_rank(c, bytesPtr(names), C.unsigned(len(nodes)), (*C.int64_t)(unsafe.Pointer(&ranks[0])), e.ptr()))
	})
	return ranks[:len(nodes)], err
}

// Assume reserves the pod's units on node: the allocation annotation (""
// when the pod holds no devices), or draAtBind when DRA chooses its devices
// there and the assumption waits for bind (Embed.AssumeDRA).
func (p *Pod) Assume(node string) (annotation string, draAtBind bool, err error) {
	err = errFreed
	n := C.CString(node)
	defer C.free(unsafe.Pointer(n))
	p.with(func(c *C.ft_embed_pod_t) {
		e := newErrBuf()
		defer e.release()
		var out *C.char
		rc := C.shim_assume(c, n, &out, e.ptr())
		if err = e.err(rc); err != nil {
			return
		}
		draAtBind = rc == 1
		if out != nil {
			annotation = C.GoString(out)
			C.free(unsafe.Pointer(out))
		}
	})
	return annotation, draAtBind, err
}

// Bound settles the assumption after the Binding: written (bindErr nil) or
// refused, and records the bind decision and its latency.
func (p *Pod) Bound(node string, bindErr error, took time.Duration) {
	n := C.CString(node)
	defer C.free(unsafe.Pointer(n))
	rc, msg := C.int(0), (*C.char)(nil)
	if bindErr != nil {
		rc = C.FT_ERROR
		msg = C.CString(bindErr.Error())
		defer C.free(unsafe.Pointer(msg))
	}
	p.with(func(c *C.ft_embed_pod_t) {
		C.ft_embed_bound(c, n, rc, msg, C.uint64_t(took.Nanoseconds()))
	})
}

// Outcome is what the victim search decided for one node.
type Outcome int

const (
	Chosen   Outcome = C.FT_PREEMPT_VICTIMS // evict Victims.UIDs
	Proposed Outcome = C.FT_PREEMPT_PASSED  // keep the scheduler's victims
	Dropped  Outcome = C.FT_PREEMPT_DROPPED // no set works
)

// Victims is the victim search's answer for one node.
type Victims struct {
	Outcome       Outcome
	UIDs          []string // Chosen: by descending priority
	PDBViolations int
	// Chosen: the cost over every pod the victims disrupt, the members of
	// the gangs they break included (include/flextopo/victims.h), and
	// whether they break one.
	Cost        Cost
	BreaksGangs bool
}

// Cost is a victim set's cost (ft_victim_cost_t): budget violations,
// highest priority, priority sum, count and earliest start, taken over
// every pod the set disrupts.
type Cost struct{ c C.ft_victim_cost_t }

// Compare orders two costs as the C core's victim search does
// (ft_victims_compare): negative when a is the cheaper, 0 when equal.
func (a Cost) Compare(b Cost) int { return int(C.ft_victims_compare(&a.c, &b.c)) }

// Disrupted is the number of pods the set disrupts.
func (a Cost) Disrupted() int { return int(a.c.count) }

// Victims chooses the victims on node: proposed are the uids the
// scheduler's own search chose, with their budget violations.
func (p *Pod) Victims(node string, proposed []string, proposedPDB int) (Victims, error) {
	var v Victims
	err := errFreed
	n := C.CString(node)
	defer C.free(unsafe.Pointer(n))
	list := joined(proposed)
	p.with(func(c *C.ft_embed_pod_t) {
		e := newErrBuf()
		defer e.release()
		var out C.ft_embed_victims_t
		err = e.err(C.shim_victims(&out, c, n, bytesPtr(list), C.unsigned(len(proposed)), C.unsigned(proposedPDB), e.ptr()))
		if err != nil {
			return
		}
		defer C.free(unsafe.Pointer(out.uids))
		v.Outcome, v.PDBViolations = Outcome(out.outcome), int(out.pdb_violations)
		v.Cost, v.BreaksGangs = Cost{out.cost}, out.n_broken > 0
		if out.n > 0 {
			all := C.GoStringN(out.uids, C.int(totalLen(out.uids, int(out.n))))
			v.UIDs = strings.Split(strings.TrimSuffix(all, "\x00"), "\x00")
		}
	})
	return v, err
}

// totalLen is the bytes of n NUL-terminated strings back to back.
func totalLen(s *C.char, n int) int {
	at := 0
	for i := 0; i < n; i++ {
		at += int(C.strlen((*C.char)(unsafe.Add(unsafe.Pointer(s), at)))) + 1
	}
	return at
}

// PreemptDone records the preemption decision of the cycle.
func (p *Pod) PreemptDone() {
	p.with(func(c *C.ft_embed_pod_t) { C.ft_embed_preempt_done(c) })
}

func (k Kind) String() string {
	switch k {
	case KindNode:
		return "node"
	case KindPod:
		return "pod"
	case KindPDB:
		return "poddisruptionbudget"
	case KindSlice:
		return "resourceslice"
	case KindClaim:
		return "resourceclaim"
	case KindClass:
		return "deviceclass"
	}
	return fmt.Sprintf("kind %d", int(k))
}
