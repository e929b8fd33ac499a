package groupcommit

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the group commits' Prometheus metrics, labelled by endpoint.
type Metrics struct {
	ackSeconds                   *prometheus.HistogramVec
	commitRows, commitBytes      *prometheus.HistogramVec
	commitStreams, commitSeconds *prometheus.HistogramVec
	commits                      *prometheus.CounterVec
	open                         *prometheus.GaugeVec
}

// NewMetrics makes the metrics and registers them on reg (nil: nowhere).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	ep := []string{"endpoint"}
	m := &Metrics{
		ackSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quiver_stream_durable_ack_seconds", Help: "Time from a continuous stream's batch being written to the answer that it is durable.",
			Buckets: prometheus.ExponentialBuckets(0.01, 1.5, 20),
		}, ep),
		commitRows: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quiver_stream_group_commit_rows", Help: "Rows one group commit published.",
			Buckets: prometheus.ExponentialBuckets(1000, 4, 10),
		}, ep),
		commitBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quiver_stream_group_commit_bytes", Help: "Arrow bytes one group commit published.",
			Buckets: prometheus.ExponentialBuckets(1<<16, 4, 10),
		}, ep),
		commitStreams: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quiver_stream_group_commit_streams", Help: "Streams whose rows one group commit published.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}, ep),
		commitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "quiver_stream_group_commit_seconds", Help: "Latency of a group commit's precommit and commit.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, ep),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_stream_group_commits_total", Help: "Group commits by result: committed, replayed, failed.",
		}, []string{"endpoint", "result"}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "quiver_streams_open", Help: "Continuous streams open.",
		}, ep),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.ackSeconds, m.commitRows, m.commitBytes, m.commitStreams, m.commitSeconds, m.commits, m.open} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("groupcommit: register metrics: %w", err)
		}
	}
	return m, nil
}

// endpointMetrics are the metrics of one endpoint, labels resolved once.
type endpointMetrics struct {
	ack, rows, bytes, streams, seconds prometheus.Observer
	commits                            *prometheus.CounterVec
	open                               prometheus.Gauge
}

func (m *Metrics) forEndpoint(name string) endpointMetrics {
	return endpointMetrics{
		ack:     m.ackSeconds.WithLabelValues(name),
		rows:    m.commitRows.WithLabelValues(name),
		bytes:   m.commitBytes.WithLabelValues(name),
		streams: m.commitStreams.WithLabelValues(name),
		seconds: m.commitSeconds.WithLabelValues(name),
		commits: m.commits.MustCurryWith(map[string]string{"endpoint": name}),
		open:    m.open.WithLabelValues(name),
	}
}
