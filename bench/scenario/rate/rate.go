// Package rate holds what the append scenarios of quiverbench
// (delta-append, lance-append) share: the rate of one target at one
// stream count, either measured through a Quiver endpoint with bench.Run
// or computed from a reference's own timing, in the units of bench's
// reports (rows/s, and MB/s of Arrow IPC body bytes).
package rate

import (
	"context"
	"fmt"
	"io"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/server/config"
)

// Row is one target's rate at one stream count.
type Row struct {
	Target     string
	Streams    int
	RowsPerSec float64
	MBPerSec   float64
	// PeakRSS is the process's peak RSS over a measured row's runs in
	// bytes (the in-process server and its clients together), -1 when
	// unknown, 0 for a reference timed outside bench.Run.
	PeakRSS int64
}

// RSS is PeakRSS for a report: MiB, "?" when unknown, "" when not measured.
func (r Row) RSS() string {
	switch {
	case r.PeakRSS < 0:
		return "?"
	case r.PeakRSS == 0:
		return ""
	}
	return fmt.Sprint(r.PeakRSS >> 20)
}

// Measure drives endpoint of the server at addr with load's rows and runs
// at streams streams (bench.Run) and returns its rate, named after
// endpoint.
func Measure(ctx context.Context, addr, endpoint string, load bench.Load, streams int, log io.Writer) (Row, error) {
	reset := bench.ResetPeakRSS()
	rep, err := bench.Run(ctx, bench.NewConfig(addr, endpoint, bench.Load{Streams: []int{streams}, Rows: load.Rows, Runs: load.Runs}), log)
	if err != nil {
		return Row{}, err
	}
	peak := bench.PeakRSS()
	if reset != nil {
		peak = -1 // the peak would cover what ran before
	}
	res := rep.Results[0]
	return Row{Target: endpoint, Streams: streams, RowsPerSec: res.RowsPerSec, MBPerSec: res.MBPerSec, PeakRSS: peak}, nil
}

// Of is the rate of a target timed outside bench.Run at rowsPerSec, over
// rows rows whose IPC body is ipcBytes (workload.TotalIPCBodyBytes), so
// that its MB/s counts the same bytes as bench.Run's.
func Of(target string, streams int, rowsPerSec float64, ipcBytes, rows int64) Row {
	return Row{Target: target, Streams: streams, RowsPerSec: rowsPerSec, MBPerSec: rowsPerSec * float64(ipcBytes) / float64(rows) / 1e6}
}

// RSSNote explains the peak RSS column under a report: the process holds
// the server and its clients, whose budget is the default
// limits.memory_bytes.
func RSSNote(w io.Writer) error {
	_, err := fmt.Fprintf(w, "peak RSS: the whole process (the server and its in-process clients); the server's memory budget is limits.memory_bytes = %d MiB\n", config.Default().Limits.MemoryBytes>>20)
	return err
}
