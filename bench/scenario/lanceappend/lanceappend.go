// Package lanceappend is the lance-append scenario of quiverbench: it
// measures the Lance sink end to end. It starts one Quiver server in
// process with a Lance append endpoint on a file:// dataset, drives it
// with the standard workload (bench.Run) at each stream count, and in the
// same run lets LanceDB (@lancedb/lancedb 0.31.0 through the LanceDB
// probe, internal/lanceprobe) create a storage-2.1 table from the same
// rows, read from an Arrow IPC file. It prints rows/s and MB/s (IPC body
// bytes) of each, and Quiver's ratio to LanceDB:
//
//	go run ./bench/cmd/quiverbench --scenario lance-append --streams 1,4 --rows 1000000
//
// LanceDB's time covers createTable alone (the IPC file is read and
// decoded before the clock starts); Quiver's covers sending, writing and
// committing. --no-lancedb skips the LanceDB side (no node needed; else
// the probe must be installed: make lance-probe). Everything lives in a
// temporary folder removed at exit.
package lanceappend

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
	"github.com/quiver-ingest/quiver/bench/scenario/rate"
	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/internal/lanceprobe"
)

// Options are the scenario's flags.
type Options struct {
	bench.Load
	noLanceDB bool
}

// Register adds --streams, --rows, --runs and --no-lancedb to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	o.Load.Register(fs, 1_000_000)
	fs.BoolVar(&o.noLanceDB, "no-lancedb", false, "skip LanceDB's side")
}

// Scenario is the lance-append scenario for bench.Main.
func Scenario() bench.Scenario {
	return bench.NewScenario[Options]("lance-append", "Lance append vs LanceDB createTable (--no-lancedb: Quiver alone)", run)
}

func run(ctx context.Context, o Options, out, log io.Writer) (err error) {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("lance-append: %w", err)
	}
	dir, err := os.MkdirTemp("", "quiverbench-lance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := bench.Start(ctx, dir, filepath.Join(dir, "data"), fmt.Sprintf("  - name: items\n    sink: lance\n    lance: {dataset_uri: \"file://%s\"}\n",
		filepath.Join(dir, "quiver", "items.lance")))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, bench.Stop(ctx, srv)) }()

	var rows []rate.Row
	for _, streams := range o.Streams {
		r, err := rate.Measure(ctx, srv.FlightAddr(), "items", o.Load, streams, log)
		if err != nil {
			return fmt.Errorf("quiver, %d streams: %w", streams, err)
		}
		r.Target = "quiver-lance"
		rows = append(rows, r)
	}
	if !o.noLanceDB {
		r, err := lanceDB(dir, o.Rows, o.Runs, log)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	return report(out, rows, "lancedb-createTable")
}

// lanceDB writes the workload's rows as an Arrow IPC file and lets LanceDB
// create a table of its default format 2.1 from it runs times, reporting
// the median (Quiver writes 2.2, its default for new datasets).
func lanceDB(dir string, rows int64, runs int, log io.Writer) (rate.Row, error) {
	probe, err := lanceprobe.Dir()
	if err != nil {
		return rate.Row{}, fmt.Errorf("%w (use --no-lancedb to measure Quiver alone)", err)
	}
	file := filepath.Join(dir, "workload.arrow")
	ipcBytes, err := writeIPC(file, rows)
	if err != nil {
		return rate.Row{}, err
	}
	var rates []float64
	for i := range runs {
		var res struct {
			Rows int64
			MS   float64
		}
		if err := lanceprobe.NodeJSON(probe, lanceprobe.Script, &res, "create-ipc", filepath.Join(dir, "lancedb"), fmt.Sprintf("t%d", i), file, "--storage", "2.1"); err != nil {
			return rate.Row{}, fmt.Errorf("lancedb createTable: %w", err)
		}
		if res.Rows != rows || res.MS <= 0 {
			return rate.Row{}, fmt.Errorf("lancedb createTable made %d rows in %.1f ms, want %d rows", res.Rows, res.MS, rows)
		}
		rates = append(rates, float64(rows)/(res.MS/1000))
		fmt.Fprintf(log, "lance-append: lancedb createTable run %d: %.0f rows/s\n", i+1, rates[i])
	}
	med := bench.Median(rates)
	return rate.Of("lancedb-createTable", 1, med, ipcBytes, rows), nil
}

// writeIPC writes rows rows of the standard workload to an Arrow IPC file
// and returns their IPC body bytes (the unit of bench's MB/s).
func writeIPC(path string, rows int64) (int64, error) {
	batches, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, rows, workload.DefaultBatchRows)
	if err != nil {
		return 0, err
	}
	defer workload.ReleaseAll(batches)
	body, err := workload.TotalIPCBodyBytes(memory.DefaultAllocator, batches)
	if err != nil {
		return 0, err
	}
	return body, lanceprobe.WriteIPC(path, workload.Schema(), batches)
}

// report prints one line per target and stream count, with each target's
// ratio to the baseline target's rows/s.
func report(w io.Writer, rows []rate.Row, baseline string) error {
	var lance float64
	for _, r := range rows {
		if r.Target == baseline {
			lance = r.RowsPerSec
		}
	}
	tw := bench.NewTable(w)
	fmt.Fprintln(tw, "target\tstreams\trows/s\tMB/s\tvs lancedb\tpeak RSS MiB\t")
	for _, r := range rows {
		ratio := ""
		if lance > 0 && r.Target != baseline {
			ratio = fmt.Sprintf("%.2fx", r.RowsPerSec/lance)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%s\t%s\t\n", r.Target, r.Streams, r.RowsPerSec, r.MBPerSec, ratio, r.RSS())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return rate.RSSNote(w)
}
