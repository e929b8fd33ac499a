package lance

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/quiver-ingest/quiver/writers"
)

// metrics are one Lance endpoint's sink metrics (the Registerer of
// writers.Env already carries the endpoint label).
type metrics struct {
	rowsWritten  prometheus.Counter
	filesWritten prometheus.Counter
	bytesWritten prometheus.Counter
	version      prometheus.Gauge
	commits      *prometheus.CounterVec
	rebases      prometheus.Counter
	conflicts    prometheus.Counter
	mergeRows    *prometheus.CounterVec
	delFiles     prometheus.Counter
	delBytes     prometheus.Counter
	indexKeys    prometheus.Gauge
	indexBytes   prometheus.Gauge
	indexSyncs   *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		rowsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_lance_rows_written_total",
			Help: "Rows in data files finished by the Lance sink (committed or not).",
		}),
		filesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_lance_files_written_total",
			Help: "Lance data files finished by the Lance sink (committed or not).",
		}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_lance_bytes_written_total",
			Help: "Bytes of Lance data files finished by the Lance sink.",
		}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quiver_lance_dataset_version",
			Help: "Latest Lance dataset version this sink has seen or written (-1: no dataset yet).",
		}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_lance_commits_total",
			Help: "Lance sink commits by result: committed, replayed or failed.",
		}, []string{"result"}),
		rebases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_lance_commit_rebases_total",
			Help: "Lance commits that lost the race for their version and were rebased over the winners' transactions.",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_lance_commit_conflicts_total",
			Help: "Lance commit attempts that lost a race they could not rebase over (concurrent create, overwrite or schema change): planned again or failed.",
		}),
		mergeRows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_lance_merge_rows_total",
			Help: "Rows of committed merge_insert versions by action: inserted, updated, deleted, skipped_duplicates (first_seen).",
		}, []string{"action"}),
		delFiles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_lance_deletion_files_written_total",
			Help: "Deletion files written by merge_insert precommits (committed or not).",
		}),
		delBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quiver_lance_deletion_bytes_written_total",
			Help: "Bytes of deletion files written by merge_insert precommits.",
		}),
		indexKeys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quiver_lance_key_index_keys",
			Help: "Keys in the merge_insert key index.",
		}),
		indexBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quiver_lance_key_index_bytes",
			Help: "Memory held by the merge_insert key index.",
		}),
		indexSyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_lance_key_index_syncs_total",
			Help: "Key index syncs by result: before a merge current (nothing changed), patched (changed fragments re-read), rebuilt or disabled (outgrew key_index_max_bytes); committed when a merge's own commit patched it.",
		}, []string{"result"}),
	}
	m.version.Set(-1)
	return m
}

// register adds every metric to reg (nil: none) until Unregister.
func (m *metrics) register(reg prometheus.Registerer) (*writers.Metrics, error) {
	return writers.RegisterMetrics(reg, "lance", m.rowsWritten, m.filesWritten, m.bytesWritten, m.version, m.commits, m.rebases, m.conflicts, m.mergeRows, m.delFiles, m.delBytes, m.indexKeys, m.indexBytes, m.indexSyncs)
}

// countMerge adds a committed merge's row counts.
func (m *metrics) countMerge(c mergeCounts) {
	m.mergeRows.WithLabelValues("inserted").Add(float64(c.Inserted))
	m.mergeRows.WithLabelValues("updated").Add(float64(c.Updated))
	m.mergeRows.WithLabelValues("deleted").Add(float64(c.Deleted))
	m.mergeRows.WithLabelValues("skipped_duplicates").Add(float64(c.Skipped))
}
