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
// --merge runs the merge-insert scenario instead (see mergeBench):
//
//	go run ./writers/lance/cmd/lancebench --merge --base-rows 2000000 --merge-rows 200000
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/clients/go/quiverflag"
	"github.com/quiver-ingest/quiver/server"
	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/writers/lance/internal/lanceprobe"
)

type options struct {
	streams   []int
	rows      int64
	runs      int
	noLanceDB bool
	merge     bool
	mo        mergeOptions
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var o options
	fs := flag.NewFlagSet("lancebench", flag.ExitOnError)
	streams := fs.String("streams", "1,4", "concurrent streams, a comma list runs each")
	fs.Int64Var(&o.rows, "rows", 1_000_000, "rows per stream (and of LanceDB's table)")
	fs.IntVar(&o.runs, "runs", 3, "runs per stream count; the median is reported")
	fs.BoolVar(&o.noLanceDB, "no-lancedb", false, "skip LanceDB's side")
	fs.BoolVar(&o.merge, "merge", false, "run the merge-insert scenario (needs LanceDB)")
	fs.Int64Var(&o.mo.baseRows, "base-rows", 2_000_000, "--merge: rows of the base dataset")
	fs.Int64Var(&o.mo.srcRows, "merge-rows", 200_000, "--merge: rows per merge, half existing ids")
	fs.IntVar(&o.mo.warm, "warm", 3, "--merge: merges after the first (warm key index)")
	fs.Parse(os.Args[1:])
	for s := range strings.SplitSeq(*streams, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "lancebench: --streams %q: give positive integers\n", *streams)
			os.Exit(2)
		}
		o.streams = append(o.streams, n)
	}
	run := run
	if o.merge {
		run = func(ctx context.Context, o options, out, log io.Writer) error { return mergeBench(ctx, o.mo, out, log) }
	}
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "lancebench:", err)
		os.Exit(1)
	}
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
	srv, err := startServer(ctx, dir, fmt.Sprintf("  - name: items\n    sink: lance\n    lance: {dataset_uri: \"file://%s\"}\n",
		filepath.Join(dir, "quiver", "items.lance")))
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, srv.Shutdown(sctx))
	}()

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

// startMergeServer serves one Lance merge_insert endpoint, merged (on id,
// update_all + insert_all), on the dataset folder dataset.
func startMergeServer(ctx context.Context, dir, dataset string) (*server.Server, error) {
	return startServer(ctx, dir, fmt.Sprintf("  - name: merged\n    sink: lance\n    lance: {dataset_uri: \"file://%s\", mode: merge_insert, on: [id]}\n", dataset))
}

// startServer serves the endpoints of the YAML list endpoints, with its
// data_dir under dir.
func startServer(ctx context.Context, dir, endpoints string) (*server.Server, error) {
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: %s\nlog: {level: warn}\nendpoints:\n%s",
		filepath.Join(dir, "data"), endpoints)
	reg := server.Sinks()
	cfg, err := config.Parse([]byte(yaml), dir, reg)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(cfg, server.Options{Sinks: reg})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(ctx); err != nil {
		return nil, err
	}
	return srv, nil
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
		outText, err := lanceprobe.Node(probe, lanceprobe.QuiverScript, "create-ipc", filepath.Join(dir, "lancedb"), fmt.Sprintf("t%d", i), file, "--storage", "2.0")
		if err != nil {
			return row{}, fmt.Errorf("lancedb createTable: %w\n%s", err, outText)
		}
		var res struct {
			Rows int64   `json:"rows"`
			MS   float64 `json:"ms"`
		}
		lines := strings.Split(strings.TrimSpace(outText), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.Rows != rows {
			return row{}, fmt.Errorf("lancedb createTable answered %q (%v), want %d rows", outText, err, rows)
		}
		rates = append(rates, float64(rows)/(res.MS/1000))
		fmt.Fprintf(log, "lancebench: lancedb createTable run %d: %.0f rows/s\n", i+1, rates[i])
	}
	med := median(rates)
	return row{target: "lancedb-createTable", streams: 1, rowsPerSec: med, mbPerSec: med * float64(ipcBytes) / float64(rows) / 1e6}, nil
}

// writeIPC writes rows rows of the standard workload to an Arrow IPC file
// and returns their IPC body bytes (the unit of bench's MB/s).
func writeIPC(path string, rows int64) (int64, error) {
	batches, err := bench.Generate(memory.DefaultAllocator, bench.DefaultSeed, rows, bench.DefaultBatchRows)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(bench.Schema()))
	if err != nil {
		return 0, err
	}
	var body int64
	for _, b := range batches {
		n, err := bench.IPCBodyBytes(memory.DefaultAllocator, b)
		if err != nil {
			return 0, err
		}
		body += n
		if err := w.Write(b); err != nil {
			return 0, err
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return body, f.Close()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
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
