package harness

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PauseImage is the image of the test pods: pods of nodes created through
// the API or run by kwok, which no kubelet pulls.
const PauseImage = "registry.k8s.io/pause:3.10"

// CreatePriorityClasses creates a PriorityClass per entry of values (one
// that exists already is kept); those in never get PreemptionPolicy Never.
func CreatePriorityClasses(cx context.Context, client kubernetes.Interface, values map[string]int32,
	never map[string]bool, description string) error {
	for name, v := range values {
		pc := &schedulingv1.PriorityClass{
			ObjectMeta:  metav1.ObjectMeta{Name: name},
			Value:       v,
			Description: description,
		}
		if never[name] {
			policy := corev1.PreemptNever
			pc.PreemptionPolicy = &policy
		}
		_, err := client.SchedulingV1().PriorityClasses().Create(cx, pc, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create PriorityClass %s: %w", name, err)
		}
	}
	for name := range values {
		if err := waitPriorityAdmits(cx, client, name); err != nil {
			return err
		}
	}
	return nil
}

// waitPriorityAdmits waits until kube-apiserver admits a pod of
// PriorityClass name. Its Priority admission plugin reads the classes from
// an informer's cache, so a pod created right after its class can be
// refused with "no PriorityClass with name ... was found". The probe is a
// dry-run create: nothing is stored.
func waitPriorityAdmits(cx context.Context, client kubernetes.Interface, name string) error {
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "priority-probe-"},
		Spec: corev1.PodSpec{
			PriorityClassName: name,
			Containers:        []corev1.Container{{Name: "probe", Image: PauseImage}},
		},
	}
	for {
		_, err := client.CoreV1().Pods(metav1.NamespaceDefault).Create(cx, probe,
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		// Any other answer ends the wait: the probe looks for that one
		// refusal, and the test's own pods report anything else.
		if err == nil || !strings.Contains(err.Error(), "no PriorityClass with name") {
			return nil
		}
		select {
		case <-cx.Done():
			return fmt.Errorf("PriorityClass %s: kube-apiserver still refuses its pods: %w", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PodCondition is the pod's condition of type t, or nil.
func PodCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Parallel runs f(i) for i in [0, n) on workers goroutines.
func Parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// Percentile is the nearest-rank percentile p (0..100) of xs, NaN when xs
// is empty.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
