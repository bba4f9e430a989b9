package agent

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// NodePods watches the pods bound to one node (field selector
// spec.nodeName), which is all the agent reads.
type NodePods struct {
	client kubernetes.Interface
	lister listersv1.PodLister
	synced cache.InformerSynced
}

// NewNodePods starts the informer; Wait blocks until its first list.
func NewNodePods(ctx context.Context, client kubernetes.Interface, node string) *NodePods {
	f := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
		}))
	inf := f.Core().V1().Pods()
	np := &NodePods{client: client, lister: inf.Lister(), synced: inf.Informer().HasSynced}
	f.Start(ctx.Done())
	return np
}

// Wait waits for the first sync.
func (n *NodePods) Wait(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), n.synced)
}

// List returns the cached pods.
func (n *NodePods) List() []*corev1.Pod {
	pods, _ := n.lister.List(labels.Everything())
	return pods
}

// Pod returns the pod from the cache, or from the API server when the cache
// has not seen it yet (the container may be created right after the bind).
func (n *NodePods) Pod(ctx context.Context, ns, name, uid string) (*corev1.Pod, error) {
	if p, err := n.lister.Pods(ns).Get(name); err == nil && string(p.UID) == uid {
		return p, nil
	}
	p, err := n.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	if string(p.UID) != uid {
		return nil, fmt.Errorf("pod %s/%s has uid %s, the sandbox belongs to %s", ns, name, p.UID, uid)
	}
	return p, nil
}

// PodResourcesClient is kubelet's PodResources API over its unix socket
// (<kubelet root>/pod-resources/kubelet.sock).
type PodResourcesClient struct {
	conn *grpc.ClientConn
	api  podresourcesapi.PodResourcesListerClient
}

// DialPodResources connects lazily; calls fail while kubelet is away.
func DialPodResources(socket string) (*PodResourcesClient, error) {
	conn, err := grpc.NewClient("unix:"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}))
	if err != nil {
		return nil, err
	}
	return &PodResourcesClient{conn: conn, api: podresourcesapi.NewPodResourcesListerClient(conn)}, nil
}

// List asks kubelet what each container holds.
func (c *PodResourcesClient) List(ctx context.Context) ([]*podresourcesapi.PodResources, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.api.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, err
	}
	return resp.GetPodResources(), nil
}

// Allocatable asks kubelet what the node offers (GetAllocatableResources).
func (c *PodResourcesClient) Allocatable(ctx context.Context) (*podresourcesapi.AllocatableResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.api.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
}

// Close closes the connection.
func (c *PodResourcesClient) Close() error { return c.conn.Close() }
