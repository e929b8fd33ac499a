// Package deltaappend is the delta-append scenario of quiverbench: it
// measures the Delta sink end to end. It starts one Quiver server in
// process with a discard endpoint and Delta append endpoints on file://
// tables (zstd and snappy), drives each with the standard workload
// (bench.Run), and in the same run encodes the same batches with
// writers/parquetio alone, the raw Parquet encoder the sink is built on. It prints rows/s, MB/s
// (IPC body bytes sent), the data files and bytes each Delta endpoint
// wrote, and the ratios to discard and to raw encoding at each stream
// count:
//
//	go run ./bench/cmd/quiverbench --scenario delta-append --streams 1,4 --rows 2000000
//
// The tables live in a temporary folder removed at exit (--keep keeps it).
package deltaappend

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
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/bench/scenario/rate"
	"github.com/quiver-ingest/quiver/bench/workload"
	"github.com/quiver-ingest/quiver/server"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// codecs are the Delta endpoints measured, one per compression.
var codecs = []string{"zstd", "snappy"}

// Options are the scenario's flags.
type Options struct {
	bench.Load
	keep bool
}

// Register adds --streams, --rows, --runs and --keep to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	o.Load.Register(fs, 2_000_000)
	fs.BoolVar(&o.keep, "keep", false, "keep the tables' temporary folder")
}

// Scenario is the delta-append scenario for bench.Main.
func Scenario() bench.Scenario {
	return bench.NewScenario[Options]("delta-append", "Delta append (zstd, snappy) vs discard and raw Parquet encoding", run)
}

// row is one line of the report.
type row struct {
	rate.Row
	files, bytes int64 // Delta only: data files and bytes written by the measured runs
}

func run(ctx context.Context, o Options, out, log io.Writer) (err error) {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("delta-append: %w", err)
	}
	dir, remove, err := bench.TempDir("quiverbench-delta", "tables", o.keep, log)
	if err != nil {
		return err
	}
	defer remove()
	srv, err := startServer(ctx, dir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, bench.Stop(ctx, srv)) }()

	var rows []row
	for _, streams := range o.Streams {
		for _, target := range append([]string{"devnull"}, codecs...) {
			before, err := tableFiles(ctx, filepath.Join(dir, target))
			if err != nil {
				return err
			}
			r, err := rate.Measure(ctx, srv.FlightAddr(), target, o.Load, streams, log)
			if err != nil {
				return fmt.Errorf("%s, %d streams: %w", target, streams, err)
			}
			after, err := tableFiles(ctx, filepath.Join(dir, target))
			if err != nil {
				return err
			}
			rows = append(rows, row{Row: r, files: after.files - before.files, bytes: after.bytes - before.bytes})
		}
		for _, codec := range codecs {
			r, err := rawEncode(o.Rows, streams, codec, o.Runs)
			if err != nil {
				return err
			}
			fmt.Fprintf(log, "delta-append: raw parquetio %s, %d stream(s): %.0f rows/s\n", codec, streams, r.RowsPerSec)
			rows = append(rows, r)
		}
	}
	return report(out, rows)
}

// startServer serves a discard endpoint devnull and one Delta append
// endpoint per codec, named after it, on tables under dir.
func startServer(ctx context.Context, dir string) (*server.Server, error) {
	var b strings.Builder
	b.WriteString("  - {name: devnull, sink: discard}\n")
	for _, c := range codecs {
		fmt.Fprintf(&b, "  - name: %s\n    sink: delta\n    delta: {table_uri: \"file://%s\", parquet: {compression: %s}}\n", c, filepath.Join(dir, c), c)
	}
	return bench.Start(ctx, dir, filepath.Join(dir, "data"), b.String())
}

type fileTotals struct{ files, bytes int64 }

// tableFiles counts every data file (committed or not) under a table root.
func tableFiles(ctx context.Context, root string) (fileTotals, error) {
	var t fileTotals
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	b, err := storage.Open(ctx, "file://"+root, storage.Options{})
	if err != nil {
		return t, err
	}
	defer b.Close()
	for obj, err := range b.List(ctx, "", "") {
		if err != nil {
			return t, err
		}
		if strings.HasSuffix(obj.Key, ".parquet") && !strings.HasPrefix(obj.Key, deltalog.LogDir) {
			t.files++
			t.bytes += obj.Size
		}
	}
	return t, nil
}

// rawEncode encodes the workload's batches with parquetio into a byte
// counter, streams goroutines at once, each its own file of rows rows with
// the sink's default row groups; it reports the median of runs.
func rawEncode(rows int64, streams int, codec string, runs int) (row, error) {
	batches, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, rows, workload.DefaultBatchRows)
	if err != nil {
		return row{}, err
	}
	defer workload.ReleaseAll(batches)
	ipc, err := workload.TotalIPCBodyBytes(memory.DefaultAllocator, batches)
	if err != nil {
		return row{}, err
	}
	var rates []float64
	for range runs {
		start := time.Now()
		errs := make([]error, streams)
		var wg sync.WaitGroup
		for i := range streams {
			wg.Go(func() { errs[i] = encodeAll(batches, codec) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return row{}, err
		}
		rates = append(rates, float64(rows*int64(streams))/time.Since(start).Seconds())
	}
	med := bench.Median(rates)
	return row{Row: rate.Of("raw-"+codec, streams, med, ipc, rows)}, nil
}

func encodeAll(batches []arrow.RecordBatch, codec string) error {
	pw, err := parquetio.NewWriter(io.Discard, batches[0].Schema(), parquetio.Options{Compression: codec})
	if err != nil {
		return err
	}
	for _, b := range batches {
		if err := pw.Write(b); err != nil {
			pw.Close()
			return err
		}
	}
	_, err = pw.Close()
	return err
}

// report prints one line per target and stream count, with the ratios of
// each Delta endpoint to discard and to raw encoding with its codec.
func report(w io.Writer, rows []row) error {
	tw := bench.NewTable(w)
	fmt.Fprintln(tw, "target\tstreams\trows/s\tMB/s\tfiles\tbytes\tvs discard\tvs raw parquetio\tpeak RSS MiB\t")
	find := func(target string, streams int) float64 {
		for _, r := range rows {
			if r.Target == target && r.Streams == streams {
				return r.RowsPerSec
			}
		}
		return 0
	}
	for _, r := range rows {
		files, bytes, vsDiscard, vsRaw := "", "", "", ""
		if !strings.HasPrefix(r.Target, "raw-") && r.Target != "devnull" {
			files, bytes = strconv.FormatInt(r.files, 10), strconv.FormatInt(r.bytes, 10)
			vsDiscard = fmt.Sprintf("%.2fx", r.RowsPerSec/find("devnull", r.Streams))
			vsRaw = fmt.Sprintf("%.2fx", r.RowsPerSec/find("raw-"+r.Target, r.Streams))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t\n", r.Target, r.Streams, r.RowsPerSec, r.MBPerSec, files, bytes, vsDiscard, vsRaw, r.RSS())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return rate.RSSNote(w)
}
