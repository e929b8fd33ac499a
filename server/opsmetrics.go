package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/quiver-ingest/quiver/server/config"
)

// registerOpsMetrics registers what the alert rules compare against
// (deploy/prometheus/alerts.yaml): the buffer budget per endpoint and the
// space of the file system holding data_dir.
func registerOpsMetrics(reg prometheus.Registerer, cfg *config.Config) error {
	budget := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "quiver_endpoint_buffer_budget_bytes",
		Help: "limits.endpoint_buffer_bytes: the in-flight Arrow bytes each endpoint may hold (quiver_buffered_bytes) before streams block.",
	})
	budget.Set(float64(cfg.Limits.EndpointBufferBytes))
	// statfs runs at scrape time; an error (data_dir removed) drops the
	// sample rather than reporting a wrong one.
	disk := func(name, help string, bytes func(*unix.Statfs_t) uint64) prometheus.Collector {
		desc := prometheus.NewDesc(name, help, nil, nil)
		return collectorFunc{desc, func(ch chan<- prometheus.Metric) {
			var st unix.Statfs_t
			if unix.Statfs(cfg.DataDir, &st) == nil {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(bytes(&st)))
			}
		}}
	}
	for _, c := range []prometheus.Collector{
		budget,
		disk("quiver_data_dir_available_bytes", "Bytes available to the server on the file system holding data_dir.",
			func(st *unix.Statfs_t) uint64 { return st.Bavail * uint64(st.Bsize) }),
		disk("quiver_data_dir_size_bytes", "Size in bytes of the file system holding data_dir.",
			func(st *unix.Statfs_t) uint64 { return st.Blocks * uint64(st.Bsize) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// collectorFunc is a collector of one metric computed at scrape time.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
