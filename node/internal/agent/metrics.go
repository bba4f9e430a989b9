package agent

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the agent's Prometheus metrics.
type Metrics struct {
	adjusted, refused, written, patchErrors, topologyPublished prometheus.Counter
	drift                                                      prometheus.Gauge
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		adjusted: prometheus.NewCounter(prometheus.CounterOpts{Name: "flextopo_node_containers_adjusted_total",
			Help: "Containers whose cpuset and GPUs the NRI plugin set from the pod's allocation."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "flextopo_node_containers_refused_total",
			Help: "Containers whose creation the NRI plugin failed: malformed allocation or a unit the node lacks."}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "flextopo_node_observed_writes_total",
			Help: "flextopo.io/observed annotations written on pods."}),
		patchErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "flextopo_node_api_errors_total",
			Help: "Failed API server writes (observed annotations, the node topology)."}),
		topologyPublished: prometheus.NewCounter(prometheus.CounterOpts{Name: "flextopo_node_topology_published_total",
			Help: "Writes of the node's flextopo.io/topology annotation (start and each change)."}),
		drift: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flextopo_node_drift_pods",
			Help: "Pods on this node whose observed assignment differs from their allocation, or that hold GPUs or exclusive CPUs without one."}),
	}
	if reg != nil {
		reg.MustRegister(m.adjusted, m.refused, m.written, m.patchErrors, m.topologyPublished, m.drift)
	}
	return m
}
