package delta

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/quiver-ingest/quiver/writers"
)

// metrics are one Delta endpoint's sink metrics (the Registerer of
// writers.Env already carries the endpoint label).
type metrics struct {
	filesWritten prometheus.Counter
	bytesWritten prometheus.Counter
	version      prometheus.Gauge
	conflicts    prometheus.Counter
	retries      prometheus.Counter
	commits      *prometheus.CounterVec
	upsertFiles  *prometheus.CounterVec
	// keyIndexBytes is the memory of upsert's per-file key indexes.
	keyIndexBytes prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		filesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_delta_files_written_total",
			Help: "Parquet data files finished by the Delta sink (committed or not).",
		}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_delta_bytes_written_total",
			Help: "Bytes of Parquet data files finished by the Delta sink.",
		}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quiver_delta_table_version",
			Help: "Latest Delta table version this sink has seen or written (-1: no table yet).",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_delta_commit_conflicts_total",
			Help: "Delta commit attempts that lost a race to a concurrent writer (rebased by the log, or planned again).",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_delta_commit_retries_total",
			Help: "Delta commits planned again after a conflict the log could not rebase (concurrent schema change, overwrite race).",
		}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_delta_commits_total",
			Help: "Delta sink commits by result: committed, replayed or failed.",
		}, []string{"result"}),
		upsertFiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_delta_upsert_files_total",
			Help: "Target files an upsert precommit changed, by how: rewritten (copy-on-write), marked (new deletion vector) or removed (every row gone).",
		}, []string{"action"}),
		keyIndexBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quiver_delta_upsert_key_index_bytes",
			Help: "Memory held by the upsert's per-file key indexes (bounded by key_index_max_bytes).",
		}),
	}
}

// register adds every metric to reg (nil: none) until Unregister.
func (m *metrics) register(reg prometheus.Registerer) (*writers.Metrics, error) {
	return writers.RegisterMetrics(reg, "delta", m.filesWritten, m.bytesWritten, m.version, m.conflicts, m.retries, m.commits, m.upsertFiles, m.keyIndexBytes)
}
