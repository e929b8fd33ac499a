package journal

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the journal's collectors, registered on Open and
// unregistered on Close so that one process may open journals one after
// another on the same registry.
type metrics struct {
	reg      prometheus.Registerer
	fsync    prometheus.Histogram
	bytes    prometheus.Gauge
	healthy  prometheus.Gauge
	failures prometheus.Counter
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
		healthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quiver_journal_healthy",
			Help: "1 while the transaction journal takes appends, 0 while it cannot write (full disk, I/O error, directory removed).",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_journal_failures_total",
			Help: "Failed writes, syncs and repairs of the transaction journal.",
		}),
	}
	m.healthy.Set(1)
	if reg == nil {
		return m, nil
	}
	for i, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors()[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.fsync, m.bytes, m.healthy, m.failures}
}

func (m *metrics) unregister() {
	if m.reg != nil {
		for _, c := range m.collectors() {
			m.reg.Unregister(c)
		}
	}
}

// errClosed is returned by appends after Close.
var errClosed = errors.New("journal: closed")
