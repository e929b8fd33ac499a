// Command lancebench measures the Lance sink end to end: it starts one
// Quiver server in process with a Lance append endpoint on a file://
// dataset, drives it with the standard workload through package bench
// (the engine of quiverbench) at each stream count, and in the same run
// lets LanceDB (@lancedb/lancedb 0.31.0 through the lance probe) create a
// storage-2.0 table from the same rows, read from an Arrow IPC file. It
// prints rows/s and MB/s (IPC body bytes) of each, and Quiver's ratio to
// LanceDB:
//
//	go run ./writers/lance/cmd/lancebench --streams 1,4 --rows 1000000
//
// LanceDB's time covers createTable alone (the IPC file is read and
// decoded before the clock starts); Quiver's covers sending, writing and
// committing. --no-lancedb skips the LanceDB side (no node needed).
// Everything lives in a temporary folder removed at exit.
//
// --merge runs the merge-insert scenario instead, the same as
// `quiverbench --scenario merge-insert` (package mergebench):
//
//	go run ./writers/lance/cmd/lancebench --merge --base-rows 2000000 --merge-rows 200000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/bench/benchkit"
	"github.com/quiver-ingest/quiver/clients/go/quiverflag"
	"github.com/quiver-ingest/quiver/writers/lance/internal/lanceprobe"
	"github.com/quiver-ingest/quiver/writers/lance/mergebench"
)

type options struct {
	streams   []int
	rows      int64
	runs      int
	noLanceDB bool
	merge     bool
	mo        mergebench.Options
}

func main() {
	var o options
	fs := flag.NewFlagSet("lancebench", flag.ExitOnError)
	streams := fs.String("streams", "1,4", "concurrent streams, a comma list runs each")
	fs.Int64Var(&o.rows, "rows", 1_000_000, "rows per stream (and of LanceDB's table)")
	fs.IntVar(&o.runs, "runs", 3, "runs per stream count; the median is reported")
	fs.BoolVar(&o.noLanceDB, "no-lancedb", false, "skip LanceDB's side")
	fs.BoolVar(&o.merge, "merge", false, "run the merge-insert scenario (needs LanceDB)")
	o.mo.Register(fs)
	fs.Parse(os.Args[1:])
	var err error
	if o.streams, err = bench.ParseStreams(*streams); err != nil {
		benchkit.UsageError("lancebench", err)
	}
	benchkit.Run("lancebench", func(ctx context.Context) error {
		if o.merge {
			return mergebench.Run(ctx, o.mo, os.Stdout, os.Stderr)
		}
		return run(ctx, o, os.Stdout, os.Stderr)
	})
}

// row is one line of the report.
type row struct {
	target     string
	streams    int
	rowsPerSec float64
	mbPerSec   float64
}

func run(ctx context.Context, o options, out, log io.Writer) (err error) {
	dir, err := os.MkdirTemp("", "lancebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := benchkit.Start(ctx, dir, filepath.Join(dir, "data"), fmt.Sprintf("  - name: items\n    sink: lance\n    lance: {dataset_uri: \"file://%s\"}\n",
		filepath.Join(dir, "quiver", "items.lance")))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, benchkit.Stop(ctx, srv)) }()

	var rows []row
	for _, streams := range o.streams {
		rep, err := bench.Run(ctx, bench.Config{
			Conn: quiverflag.Conn{Addr: srv.FlightAddr()}, Endpoint: "items", Streams: []int{streams},
			Rows: o.rows, BatchRows: bench.DefaultBatchRows, Seed: bench.DefaultSeed, Runs: o.runs,
		}, log)
		if err != nil {
			return fmt.Errorf("quiver, %d streams: %w", streams, err)
		}
		res := rep.Results[0]
		rows = append(rows, row{target: "quiver-lance", streams: streams, rowsPerSec: res.RowsPerSec, mbPerSec: res.MBPerSec})
	}
	if !o.noLanceDB {
		r, err := lanceDB(dir, o.rows, o.runs, log)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	return report(out, rows, "lancedb-createTable")
}

// lanceDB writes the workload's rows as an Arrow IPC file and lets LanceDB
// create a 2.0 table from it runs times, reporting the median.
func lanceDB(dir string, rows int64, runs int, log io.Writer) (row, error) {
	probe, err := lanceprobe.Install()
	if err != nil {
		return row{}, fmt.Errorf("%w (use --no-lancedb to measure Quiver alone)", err)
	}
	file := filepath.Join(dir, "workload.arrow")
	ipcBytes, err := writeIPC(file, rows)
	if err != nil {
		return row{}, err
	}
	var rates []float64
	for i := range runs {
		var res struct {
			Rows int64
			MS   float64
		}
		if err := lanceprobe.NodeJSON(probe, lanceprobe.Script, &res, "create-ipc", filepath.Join(dir, "lancedb"), fmt.Sprintf("t%d", i), file, "--storage", "2.0"); err != nil {
			return row{}, fmt.Errorf("lancedb createTable: %w", err)
		}
		if res.Rows != rows || res.MS <= 0 {
			return row{}, fmt.Errorf("lancedb createTable made %d rows in %.1f ms, want %d rows", res.Rows, res.MS, rows)
		}
		rates = append(rates, float64(rows)/(res.MS/1000))
		fmt.Fprintf(log, "lancebench: lancedb createTable run %d: %.0f rows/s\n", i+1, rates[i])
	}
	med := bench.Median(rates)
	return row{target: "lancedb-createTable", streams: 1, rowsPerSec: med, mbPerSec: med * float64(ipcBytes) / float64(rows) / 1e6}, nil
}

// writeIPC writes rows rows of the standard workload to an Arrow IPC file
// and returns their IPC body bytes (the unit of bench's MB/s).
func writeIPC(path string, rows int64) (int64, error) {
	batches, err := bench.Generate(memory.DefaultAllocator, bench.DefaultSeed, rows, bench.DefaultBatchRows)
	if err != nil {
		return 0, err
	}
	defer bench.ReleaseAll(batches)
	body, err := bench.TotalIPCBodyBytes(memory.DefaultAllocator, batches)
	if err != nil {
		return 0, err
	}
	return body, lanceprobe.WriteIPC(path, bench.Schema(), batches)
}

// report prints one line per target and stream count, with each target's
// ratio to the baseline target's rows/s.
func report(w io.Writer, rows []row, baseline string) error {
	var lance float64
	for _, r := range rows {
		if r.target == baseline {
			lance = r.rowsPerSec
		}
	}
	tw := bench.NewTable(w)
	fmt.Fprintln(tw, "target\tstreams\trows/s\tMB/s\tvs lancedb\t")
	for _, r := range rows {
		ratio := ""
		if lance > 0 && r.target != baseline {
			ratio = fmt.Sprintf("%.2fx", r.rowsPerSec/lance)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%s\t\n", r.target, r.streams, r.rowsPerSec, r.mbPerSec, ratio)
	}
	return tw.Flush()
}
