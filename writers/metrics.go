package writers

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a sink's collectors, registered with the endpoint's
// Registerer while the sink is in use. Unregister on Close lets an endpoint
// be closed and built again in one process (a reload, a test) without
// "duplicate metrics collector registration".
type Metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector
}

// RegisterMetrics registers collectors with reg (what names the sink in
// errors). On failure nothing stays registered. A nil reg registers
// nothing.
func RegisterMetrics(reg prometheus.Registerer, what string, collectors ...prometheus.Collector) (*Metrics, error) {
	m := &Metrics{reg: reg}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
			continue
		}
		m.collectors = append(m.collectors, c)
	}
	if err := errors.Join(errs...); err != nil {
		m.Unregister()
		return nil, fmt.Errorf("%s: register metrics: %w", what, err)
	}
	return m, nil
}

// Unregister removes the collectors; it is idempotent.
func (m *Metrics) Unregister() {
	if m == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
	m.collectors = nil
}
