package kafka

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quiver-ingest/quiver/writers"
)

// metrics of one Kafka endpoint (the registerer carries the endpoint
// label).
type metrics struct {
	staged        prometheus.Counter
	records       *prometheus.CounterVec
	commits       *prometheus.CounterVec
	commitSeconds prometheus.Histogram
	markerReads   prometheus.Counter
	markerRecords prometheus.Counter
	autoProducers prometheus.Counter
	// registered holds the collectors on the endpoint's Registerer until
	// the writer closes.
	registered *writers.Metrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		staged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_kafka_staged_records_total", Help: "Records serialized into staging files (every record of a transaction, dead-letter records of auto-commit streams).",
		}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_kafka_records_total", Help: "Records by outcome: produced, dlq (to the dead-letter topic), failed.",
		}, []string{"result"}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_kafka_commits_total", Help: "Sink commits by result: committed, failed.",
		}, []string{"result"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "quiver_kafka_commit_seconds", Help: "Duration of successful sink commits (produce and, for transactions, the Kafka commit).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		markerReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_kafka_marker_reads_total", Help: "Reads of the marker topic (committed-epoch and commits whose writer's epoch is not cached).",
		}),
		markerRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_kafka_marker_records_read_total", Help: "Records of the marker topic read: each read goes on from where the last one ended.",
		}),
		autoProducers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_kafka_auto_producers_started_total", Help: "Transactional producers started (InitProducerId) for the pool of auto-commit streams.",
		}),
	}
	registered, err := writers.RegisterMetrics(reg, "kafka", m.staged, m.records, m.commits, m.commitSeconds, m.markerReads, m.markerRecords, m.autoProducers)
	if err != nil {
		return nil, err
	}
	m.registered = registered
	return m, nil
}

// joinErrs joins the non-nil errors.
func joinErrs(errs []error) error { return errors.Join(errs...) }
