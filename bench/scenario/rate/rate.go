// Package rate holds what the append scenarios of quiverbench
// (delta-append, lance-append) share: the rate of one target at one
// stream count, either measured through a Quiver endpoint with bench.Run
// or computed from a reference's own timing, in the units of bench's
// reports (rows/s, and MB/s of Arrow IPC body bytes).
package rate

import (
	"context"
	"io"

	"github.com/quiver-ingest/quiver/bench"
)

// Row is one target's rate at one stream count.
type Row struct {
	Target     string
	Streams    int
	RowsPerSec float64
	MBPerSec   float64
}

// Measure drives endpoint of the server at addr with load's rows and runs
// at streams streams (bench.Run) and returns its rate, named after
// endpoint.
func Measure(ctx context.Context, addr, endpoint string, load bench.Load, streams int, log io.Writer) (Row, error) {
	rep, err := bench.Run(ctx, bench.NewConfig(addr, endpoint, bench.Load{Streams: []int{streams}, Rows: load.Rows, Runs: load.Runs}), log)
	if err != nil {
		return Row{}, err
	}
	res := rep.Results[0]
	return Row{Target: endpoint, Streams: streams, RowsPerSec: res.RowsPerSec, MBPerSec: res.MBPerSec}, nil
}

// Of is the rate of a target timed outside bench.Run at rowsPerSec, over
// rows rows whose IPC body is ipcBytes (workload.TotalIPCBodyBytes), so
// that its MB/s counts the same bytes as bench.Run's.
func Of(target string, streams int, rowsPerSec float64, ipcBytes, rows int64) Row {
	return Row{Target: target, Streams: streams, RowsPerSec: rowsPerSec, MBPerSec: rowsPerSec * float64(ipcBytes) / float64(rows) / 1e6}
}
