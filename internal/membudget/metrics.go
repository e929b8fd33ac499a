package membudget

import "github.com/prometheus/client_golang/prometheus"

// Collectors returns the budget's gauges: quiver_memory_bytes{kind},
// quiver_memory_limit_bytes, quiver_open_file_writers and
// quiver_open_file_writers_limit, read when scraped.
func (b *Budget) Collectors() []prometheus.Collector {
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quiver_memory_limit_bytes", Help: "The memory budget (limits.memory_bytes).",
		}, func() float64 { return float64(b.limit) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quiver_open_file_writers", Help: "File writers open (Parquet, Lance), bounded by limits.max_open_files.",
		}, func() float64 { return float64(b.openFiles.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quiver_open_file_writers_limit", Help: "limits.max_open_files.",
		}, func() float64 { return float64(b.maxFiles) }),
	}
	for k := range numKinds {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "quiver_memory_bytes",
			Help:        "Bytes charged to the memory budget, by kind: received (messages not decoded yet, and reserved for the next), decoded (batches until written), encoder (sinks' encoder buffers), staging (sinks' other buffers), queued (batches sinks work through on their own).",
			ConstLabels: prometheus.Labels{"kind": k.String()},
		}, func() float64 { return float64(b.kinds[k].Load()) }))
	}
	return cs
}
