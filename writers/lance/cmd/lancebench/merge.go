package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench"
	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/writers/lance/internal/lanceprobe"
)

// mergeOptions is the merge-insert scenario of issue 7: a base dataset of
// baseRows rows of the standard workload (created by LanceDB, storage 2.0,
// then copied so every target starts identical), and sources of srcRows
// rows, half existing ids (new amount/score/name) and half new ids, merged
// on id with update_all + insert_all.
type mergeOptions struct {
	baseRows, srcRows int64
	warm              int // warm-index merges after the first
}

// mergeBench runs the scenario and prints one line per target: Quiver's
// first merge (the key index is built), its later merges (index warm),
// and LanceDB's mergeInsert of the first source without and with a BTREE
// index on id.
func mergeBench(ctx context.Context, o mergeOptions, out, log io.Writer) (err error) {
	probe, err := lanceprobe.Install()
	if err != nil {
		return fmt.Errorf("the merge scenario needs LanceDB for the base dataset: %w", err)
	}
	dir, err := os.MkdirTemp("", "lancebench-merge-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db := filepath.Join(dir, "db")
	baseFile := filepath.Join(dir, "base.arrow")
	if _, err := writeIPC(baseFile, o.baseRows); err != nil {
		return err
	}
	if outText, err := lanceprobe.Node(probe, lanceprobe.QuiverScript, "create-ipc", db, "base", baseFile, "--storage", "2.0"); err != nil {
		return fmt.Errorf("lancedb createTable: %w\n%s", err, outText)
	}
	for _, name := range []string{"quiver", "plain", "indexed"} {
		if err := os.CopyFS(filepath.Join(db, name+".lance"), os.DirFS(filepath.Join(db, "base.lance"))); err != nil {
			return err
		}
	}
	srcs := make([]string, 1+o.warm)
	for i := range srcs {
		srcs[i] = filepath.Join(dir, fmt.Sprintf("src%d.arrow", i))
		if err := writeSource(srcs[i], o.baseRows, o.srcRows, i); err != nil {
			return err
		}
	}

	srv, err := startMergeServer(ctx, dir, filepath.Join(db, "quiver.lance"))
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, srv.Shutdown(sctx))
	}()
	c, err := quiver.Dial(srv.FlightAddr())
	if err != nil {
		return err
	}
	defer c.Close()
	var rows []row
	var warm []float64
	for i, src := range srcs {
		rate, err := quiverMerge(ctx, c, src, int64(i+1), o.srcRows)
		if err != nil {
			return fmt.Errorf("quiver merge %d: %w", i+1, err)
		}
		fmt.Fprintf(log, "lancebench: quiver merge %d: %.0f rows/s, peak RSS %d MiB\n", i+1, rate, peakRSS()>>20)
		if i == 0 {
			rows = append(rows, row{target: "quiver-merge-cold", streams: 1, rowsPerSec: rate})
		} else {
			warm = append(warm, rate)
		}
	}
	if len(warm) > 0 {
		rows = append(rows, row{target: "quiver-merge-warm", streams: 1, rowsPerSec: median(warm)})
	}
	if outText, err := lanceprobe.Node(probe, lanceprobe.QuiverScript, "index", db, "indexed", "--column", "id"); err != nil {
		return fmt.Errorf("lancedb createIndex: %w\n%s", err, outText)
	}
	for _, name := range []string{"plain", "indexed"} {
		rate, err := lanceDBMerge(probe, db, name, srcs[0], o.srcRows)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "lancebench: lancedb mergeInsert (%s): %.0f rows/s\n", name, rate)
		rows = append(rows, row{target: "lancedb-mergeInsert-" + name, streams: 1, rowsPerSec: rate})
	}
	fmt.Fprintf(out, "base %d rows, source %d rows (half updates), quiver process peak RSS %d MiB\n", o.baseRows, o.srcRows, peakRSS()>>20)
	return report(out, rows, "lancedb-mergeInsert-plain")
}

// writeSource writes source i: the workload's rows with seed i+1, ids
// replaced by srcRows/2 existing ids spread over the base (shifted by i)
// then new ids past everything earlier sources inserted.
func writeSource(path string, baseRows, srcRows int64, i int) error {
	batches, err := bench.Generate(memory.DefaultAllocator, bench.DefaultSeed+uint64(i)+1, srcRows, bench.DefaultBatchRows)
	if err != nil {
		return err
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	half := srcRows / 2
	stride := max(baseRows/half, 1)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(bench.Schema()))
	if err != nil {
		return err
	}
	var n int64
	for _, b := range batches {
		ids := array.NewInt64Builder(memory.DefaultAllocator)
		for range b.NumRows() {
			if n < half {
				ids.Append((n*stride + int64(i)) % baseRows)
			} else {
				ids.Append(baseRows + int64(i)*srcRows + n)
			}
			n++
		}
		col := ids.NewArray()
		ids.Release()
		cols := append([]arrow.Array{col}, b.Columns()[1:]...)
		rec := array.NewRecordBatch(b.Schema(), cols, b.NumRows())
		col.Release()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// quiverMerge sends the source file as transaction (bench, epoch) to the
// merged endpoint and commits it; the clock covers sending, merging and
// committing.
func quiverMerge(ctx context.Context, c *quiver.Client, file string, epoch, n int64) (float64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var recs []arrow.RecordBatch
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	for i := range r.NumRecords() {
		rec, err := r.RecordBatch(i)
		if err != nil {
			return 0, err
		}
		rec.Retain() // the reader reuses its batch on the next call
		recs = append(recs, rec)
	}
	rr, err := array.NewRecordReader(r.Schema(), recs)
	if err != nil {
		return 0, err
	}
	defer rr.Release()
	start := time.Now()
	tx := c.Txn("bench", epoch)
	if _, err := tx.Put(ctx, "merged", rr); err != nil {
		return 0, err
	}
	if _, err := tx.Precommit(ctx); err != nil {
		return 0, err
	}
	st, err := tx.Commit(ctx, nil)
	if err != nil {
		return 0, err
	}
	if st.State != quiver.StateCommitted {
		return 0, fmt.Errorf("merge ended %s", st.State)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// lanceDBMerge runs LanceDB's mergeInsert of file into table name and
// returns its rows/s (execute alone is timed).
func lanceDBMerge(probe, db, name, file string, n int64) (float64, error) {
	outText, err := lanceprobe.Node(probe, lanceprobe.QuiverScript, "merge-insert", db, name, file, "--on", "id")
	if err != nil {
		return 0, fmt.Errorf("lancedb mergeInsert: %w\n%s", err, outText)
	}
	var res struct {
		Error string  `json:"error"`
		MS    float64 `json:"ms"`
	}
	lines := strings.Split(strings.TrimSpace(outText), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.Error != "" || res.MS <= 0 {
		return 0, fmt.Errorf("lancedb mergeInsert answered %q (%v)", outText, err)
	}
	return float64(n) / (res.MS / 1000), nil
}

// peakRSS returns this process's peak resident set size in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss << 10 // KiB on Linux
}
