package maintain

import "github.com/prometheus/client_golang/prometheus"

// metrics are one endpoint's maintenance metrics (the Registerer carries
// the endpoint label).
type metrics struct {
	runs    *prometheus.CounterVec
	seconds *prometheus.HistogramVec
	files   *prometheus.CounterVec
	bytes   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_maintenance_runs_total",
			Help: "Table maintenance runs (actions and background) by operation (optimize, vacuum) and result (ok, failed).",
		}, []string{"op", "result"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "quiver_maintenance_seconds",
			Help:    "Duration of table maintenance runs by operation.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}, []string{"op"}),
		files: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_maintenance_files_total",
			Help: "Files table maintenance touched: optimize removed/added, vacuum deleted/log_deleted.",
		}, []string{"op", "kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quiver_maintenance_bytes_total",
			Help: "Bytes of the files table maintenance touched: optimize removed/added, vacuum deleted.",
		}, []string{"op", "kind"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.runs, m.seconds, m.files, m.bytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
