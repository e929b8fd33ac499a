package journal

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the journal's collectors, registered on Open and
// unregistered on Close so that one process may open journals one after
// another on the same registry.
type metrics struct {
	reg   prometheus.Registerer
	fsync prometheus.Histogram
	bytes prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reg: reg,
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "quiver_journal_fsync_seconds",
			Help:    "Duration of the transaction journal's fdatasync calls.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quiver_journal_bytes",
			Help: "Size of the transaction journal's segments on disk.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m.fsync); err != nil {
		return nil, err
	}
	if err := reg.Register(m.bytes); err != nil {
		reg.Unregister(m.fsync)
		return nil, err
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg != nil {
		m.reg.Unregister(m.fsync)
		m.reg.Unregister(m.bytes)
	}
}

// errClosed is returned by appends after Close.
var errClosed = errors.New("journal: closed")
