// Command upsertbench measures the Delta sink's upsert (mode: upsert) end
// to end through Flight, the "Benchmark" of the Delta upsert issue: it
// starts one Quiver server in process with two Delta endpoints on one
// file:// table (seed, append; upsert, merge_keys [id]), appends a table
// of the standard workload (package bench's generator), then merges a
// changelog into it as one transaction per run: half the rows are
// existing ids spread over the whole table (every 20th id) with new
// values (each run ids of its own), half are new ids. It prints, per run and as the median, the
// changelog's rows/s (put, precommit and commit), the files the commit
// rewrote (removes) and added, the bytes it added, and the process's peak
// RSS during the upsert (VmHWM, reset before each run):
//
//	go run ./bench/cmd/upsertbench --table-rows 2000000 --change-rows 200000
//
// The table lives in a temporary folder removed at exit (--keep keeps it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/bench/benchkit"
	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/server"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

type options struct {
	tableRows, changeRows int64
	runs                  int
	codec                 string
	keep                  bool
}

func main() {
	var o options
	fs := flag.NewFlagSet("upsertbench", flag.ExitOnError)
	fs.Int64Var(&o.tableRows, "table-rows", 2_000_000, "rows of the table before the first upsert")
	fs.Int64Var(&o.changeRows, "change-rows", 200_000, "rows of each changelog (half updates, half inserts)")
	fs.IntVar(&o.runs, "runs", 3, "upserts, one epoch each, into the same table; the median is reported")
	fs.StringVar(&o.codec, "codec", "zstd", "parquet compression of the table: zstd, snappy or none")
	fs.BoolVar(&o.keep, "keep", false, "keep the table's temporary folder")
	fs.Parse(os.Args[1:])
	if o.tableRows <= 0 || o.changeRows <= 0 || o.runs <= 0 || o.runs > 10 || o.changeRows*5 > o.tableRows {
		benchkit.UsageError("upsertbench", errors.New("give positive sizes, at most 10 runs, and --table-rows at least 5 × --change-rows (updates hit every 20th id, shifted by one per run)"))
	}
	benchkit.Run("upsertbench", func(ctx context.Context) error { return run(ctx, o, os.Stdout, os.Stderr) })
}

// result is one upsert run.
type result struct {
	epoch               int64
	seconds             float64
	rowsPerSec          float64
	removes, adds       int
	addBytes            int64
	peakRSS             int64 // bytes; -1 when unknown
	peakRSSSinceStart   bool  // the peak could not be reset: it covers the whole process
	tableRowsAfterwards int64
}

func run(ctx context.Context, o options, out, log io.Writer) (err error) {
	dir, remove, err := benchkit.TempDir("upsertbench", "table", o.keep, log)
	if err != nil {
		return err
	}
	defer remove()
	tableDir := filepath.Join(dir, "table")
	srv, err := startServer(ctx, dir, tableDir, o.codec)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, benchkit.Stop(ctx, srv)) }()
	c, err := quiver.Dial(srv.FlightAddr())
	if err != nil {
		return err
	}
	defer c.Close()

	start := time.Now()
	if err := seed(ctx, c, o.tableRows); err != nil {
		return err
	}
	fmt.Fprintf(log, "upsertbench: seeded %d rows in %.1fs\n", o.tableRows, time.Since(start).Seconds())

	changes, err := bench.Generate(memory.DefaultAllocator, bench.DefaultSeed+1, o.changeRows, bench.DefaultBatchRows)
	if err != nil {
		return err
	}
	defer bench.ReleaseAll(changes)
	var results []result
	for epoch := int64(1); epoch <= int64(o.runs); epoch++ {
		r, err := upsert(ctx, c, tableDir, o, changes, epoch)
		if err != nil {
			return fmt.Errorf("upsert epoch %d: %w", epoch, err)
		}
		fmt.Fprintf(log, "upsertbench: epoch %d: %.0f rows/s\n", epoch, r.rowsPerSec)
		results = append(results, r)
	}
	return report(out, o, results)
}

// startServer serves the append endpoint seed and the upsert endpoint
// upsert (merge_keys [id]) on the table tableDir.
func startServer(ctx context.Context, dir, tableDir, codec string) (*server.Server, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "  - name: seed\n    sink: delta\n    delta: {table_uri: \"file://%s\", parquet: {compression: %s}}\n", tableDir, codec)
	fmt.Fprintf(&b, "  - name: upsert\n    sink: delta\n    delta: {table_uri: \"file://%s\", mode: upsert, merge_keys: [id], parquet: {compression: %s}}\n", tableDir, codec)
	return benchkit.Start(ctx, dir, filepath.Join(dir, "data"), b.String())
}

// seed appends ids [0, rows) of the standard workload in one auto-commit
// stream.
func seed(ctx context.Context, c *quiver.Client, rows int64) error {
	batches, err := bench.Generate(memory.DefaultAllocator, bench.DefaultSeed, rows, bench.DefaultBatchRows)
	if err != nil {
		return err
	}
	defer bench.ReleaseAll(batches)
	rr, err := array.NewRecordReader(bench.Schema(), batches)
	if err != nil {
		return err
	}
	defer rr.Release()
	if _, err := c.Put(ctx, "seed", rr); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return nil
}

// upsert merges changes, with their ids rewritten, as transaction
// (upsertbench, epoch), and measures it. Even rows update the existing id
// 10 × row + epoch - 1: every epoch updates ids of its own, still in the
// seed's (rewritten) files, so every run rewrites them all, as the first
// does. Odd rows insert an id no epoch used.
func upsert(ctx context.Context, c *quiver.Client, tableDir string, o options, changes []arrow.RecordBatch, epoch int64) (result, error) {
	batches := bench.WithIDs(memory.DefaultAllocator, changes, func(row int64) int64 {
		if row%2 == 0 {
			return row*10 + epoch - 1
		}
		return o.tableRows + epoch*o.changeRows + row
	})
	defer bench.ReleaseAll(batches)
	rr, err := array.NewRecordReader(bench.Schema(), batches)
	if err != nil {
		return result{}, err
	}
	defer rr.Release()
	reset := benchkit.ResetPeakRSS()

	start := time.Now()
	tx := c.Txn("upsertbench", epoch)
	if _, err := tx.Put(ctx, "upsert", rr); err != nil {
		return result{}, err
	}
	if _, err := tx.Precommit(ctx); err != nil {
		return result{}, err
	}
	st, err := tx.Commit(ctx, nil)
	if err != nil {
		return result{}, err
	}
	elapsed := time.Since(start).Seconds()
	r := result{epoch: epoch, seconds: elapsed, rowsPerSec: float64(o.changeRows) / elapsed, peakRSS: benchkit.PeakRSS(), peakRSSSinceStart: reset != nil}
	ec, ok := st.Endpoints["upsert"]
	if !ok || ec.Version == nil {
		return result{}, fmt.Errorf("commit answered no version: %+v", st)
	}
	return r, countCommit(ctx, tableDir, *ec.Version, &r)
}

// countCommit reads the commit at version and counts its removes and adds
// into r, with the table's rows afterwards.
func countCommit(ctx context.Context, tableDir string, version int64, r *result) error {
	b, err := storage.Open(ctx, "file://"+tableDir, storage.Options{})
	if err != nil {
		return err
	}
	defer b.Close()
	actions, err := deltalog.ReadCommit(ctx, b, version)
	if err != nil {
		return err
	}
	for _, a := range actions {
		switch {
		case a.Remove != nil:
			r.removes++
		case a.Add != nil:
			r.adds++
			r.addBytes += a.Add.Size
		}
	}
	snap, err := deltalog.LoadVersion(ctx, b, version)
	if err != nil {
		return err
	}
	r.tableRowsAfterwards, _ = snap.NumRecords()
	return nil
}

// report prints one line per run and the median run by rows/s.
func report(w io.Writer, o options, rs []result) error {
	fmt.Fprintf(w, "upsert of %d changelog rows (%d updates spread over the table, %d inserts) into %d rows, merge_keys [id], %s, through Flight\n",
		o.changeRows, (o.changeRows+1)/2, o.changeRows/2, o.tableRows, o.codec)
	tw := bench.NewTable(w)
	fmt.Fprintln(tw, "run\tseconds\trows/s\tfiles rewritten\tfiles added\tMiB written\tpeak RSS MiB\ttable rows after\t")
	line := func(name string, r result) {
		rss := "?"
		if r.peakRSS >= 0 {
			rss = fmt.Sprintf("%.0f", float64(r.peakRSS)/(1<<20))
			if r.peakRSSSinceStart {
				rss += " (since start)"
			}
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t%d\t%d\t%.1f\t%s\t%d\t\n", name, r.seconds, r.rowsPerSec, r.removes, r.adds, float64(r.addBytes)/(1<<20), rss, r.tableRowsAfterwards)
	}
	for _, r := range rs {
		line(strconv.FormatInt(r.epoch, 10), r)
	}
	line("median", bench.MedianBy(rs, func(r result) float64 { return r.rowsPerSec }))
	return tw.Flush()
}
