package agent

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime"
)

type runtimeObject = runtime.Object

func gaugeValue(t *testing.T, m *Metrics) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.drift.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetGauge().GetValue()
}
