package flightsvc

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Commit results, the values of the result label of quiver_commits_total.
const (
	resultCommitted = "committed" // published
	resultReplayed  = "replayed"  // epoch already committed; nothing changed
	resultAborted   = "aborted"   // auto-commit stream failed; rolled back
	resultFailed    = "failed"    // the commit itself failed
)

// metrics are the service's per-endpoint Prometheus metrics.
type metrics struct {
	rows, bytes, batches *prometheus.CounterVec
	writeSeconds         *prometheus.HistogramVec
	commitSeconds        *prometheus.HistogramVec
	commits              *prometheus.CounterVec
	buffered, streams    *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	ep := []string{"endpoint"}
	m := &metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_rows_total", Help: "Rows received by DoPut streams.",
		}, ep),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_bytes_total", Help: "Bytes of Arrow buffers received by DoPut streams.",
		}, ep),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_batches_total", Help: "Record batches received by DoPut streams.",
		}, ep),
		writeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quiver_write_seconds", Help: "Latency of one batch's sink Write.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, ep),
		commitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quiver_commit_seconds", Help: "Latency of sink commits (auto-commit streams and the commit action).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, ep),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_commits_total", Help: "Commits by result: committed, replayed, aborted, failed.",
		}, []string{"endpoint", "result"}),
		buffered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "quiver_buffered_bytes", Help: "Bytes of received batches waiting for or inside a sink Write.",
		}, ep),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "quiver_streams_active", Help: "DoPut streams in progress.",
		}, ep),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.rows, m.bytes, m.batches, m.writeSeconds, m.commitSeconds, m.commits, m.buffered, m.streams} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("flightsvc: register metrics: %w", err)
		}
	}
	return m, nil
}

// endpointMetrics are the metrics of one endpoint, labels resolved once.
type endpointMetrics struct {
	rows, bytes, batches prometheus.Counter
	write, commit        prometheus.Observer
	commits              *prometheus.CounterVec
	buffered, streams    prometheus.Gauge
}

func (m *metrics) forEndpoint(name string) endpointMetrics {
	return endpointMetrics{
		rows:     m.rows.WithLabelValues(name),
		bytes:    m.bytes.WithLabelValues(name),
		batches:  m.batches.WithLabelValues(name),
		write:    m.writeSeconds.WithLabelValues(name),
		commit:   m.commitSeconds.WithLabelValues(name),
		commits:  m.commits.MustCurryWith(prometheus.Labels{"endpoint": name}),
		buffered: m.buffered.WithLabelValues(name),
		streams:  m.streams.WithLabelValues(name),
	}
}
