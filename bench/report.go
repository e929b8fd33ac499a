package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Report is everything one bench invocation measured.
type Report struct {
	Workload WorkloadInfo `json:"workload"`
	// Server is the address measured as "quiver", or "in-process".
	Server string `json:"server"`
	// Runs per (target, streams); each Result is the median run by rows/s.
	Runs    int      `json:"runs"`
	Results []Result `json:"results"`
	// Ratios of quiver to baseline rows/s per stream count (--baseline).
	Ratios []Ratio `json:"ratios,omitempty"`
}

// WorkloadInfo describes the data each stream sent.
type WorkloadInfo struct {
	RowsPerStream int64  `json:"rows_per_stream"`
	BatchRows     int    `json:"batch_rows"`
	Batches       int    `json:"batches_per_stream"`
	BytesPerBatch int64  `json:"ipc_body_bytes_per_batch"` // mean
	Seed          uint64 `json:"seed"`
}

// Ratio compares quiver with the bare Flight server at one stream count.
type Ratio struct {
	Streams int     `json:"streams"`
	Ratio   float64 `json:"rows_per_s_ratio"`
}

// ratios pairs the quiver and baseline results of each stream count.
func ratios(results []Result) []Ratio {
	base := map[int]float64{}
	for _, r := range results {
		if r.Target == targetBaseline {
			base[r.Streams] = r.RowsPerSec
		}
	}
	var out []Ratio
	for _, r := range results {
		if b, ok := base[r.Streams]; ok && r.Target == targetQuiver && b > 0 {
			out = append(out, Ratio{Streams: r.Streams, Ratio: r.RowsPerSec / b})
		}
	}
	return out
}

// WriteJSON writes the report as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for people.
func (r Report) WriteTable(w io.Writer) error {
	wl := r.Workload
	fmt.Fprintf(w, "workload: %d rows per stream in %d-row batches (%.2f MB IPC body each), seed %d; server %s; median of %d runs\n\n",
		wl.RowsPerStream, wl.BatchRows, float64(wl.BytesPerBatch)/1e6, wl.Seed, r.Server, r.Runs)
	tw := NewTable(w)
	fmt.Fprintln(tw, "target\tstreams\trows/s\tMB/s\tack p50\tack p99\tcommit p50\tcommit max\t")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%s\t%s\t%s\t%s\t\n", res.Target, res.Streams, humanRate(res.RowsPerSec),
			res.MBPerSec, res.AckP50, res.AckP99, res.CommitP50, res.CommitMax)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, ra := range r.Ratios {
		fmt.Fprintf(w, "\nquiver/baseline, %d stream(s): %.2f", ra.Streams, ra.Ratio)
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintln(w)
	}
	return nil
}

// humanRate formats a rate like 6.12M.
func humanRate(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}
