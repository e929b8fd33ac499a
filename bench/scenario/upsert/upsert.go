// Package upsert is the Delta upsert benchmark of quiverbench
// (--scenario upsert): a table of --table-rows rows of the standard
// workload, then --upserts changelogs of --change-rows rows each
// (workload.MergeSource: half existing ids spread evenly over the table with
// new amount, score and name, half new ids), merged with merge_keys [id]
// through Flight into a server in process, one transaction each (put,
// precommit and commit, all timed).
//
// It runs twice on fresh tables: copy-on-write (a table without deletion
// vectors: every file holding a changed id is rewritten) and with deletion
// vectors (deletion_vectors: true: those files get a new deletion vector
// instead). The report gives, per mode, the median rows/s of the
// changelog, the files rewritten, marked and added per upsert, the bytes
// added and the peak RSS of the process during an upsert (client and
// generated changelog included). With --lancedb it also gives LanceDB's
// mergeInsert of the same first changelog into the same table (package
// bench/scenario/mergeinsert; needs node and the LanceDB probe: make
// lance-probe) and Quiver's ratio to it.
package upsert

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/bench/workload"
	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/server"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// Options sizes the scenario.
type Options struct {
	TableRows  int64  // rows of the table before the first upsert
	ChangeRows int64  // rows of each changelog, half of them updates
	Runs       int    // upserts per mode (--upserts); the median is reported
	Codec      string // Parquet compression of the table
	LanceDB    bool   // also measure LanceDB's mergeInsert (needs node)
}

// Register adds the scenario's flags to fs, with the sizes as
// defaults.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.Int64Var(&o.TableRows, "table-rows", 2_000_000, "upsert: rows of the table before the first upsert")
	fs.Int64Var(&o.ChangeRows, "change-rows", 200_000, "upsert: rows of each changelog (half updates spread over the table, half inserts)")
	fs.IntVar(&o.Runs, "upserts", 3, "upsert: upserts per mode, one transaction each; the median is reported")
	fs.StringVar(&o.Codec, "codec", "zstd", "upsert: Parquet compression of the table: zstd, snappy or none")
	fs.BoolVar(&o.LanceDB, "lancedb", false, "upsert: also measure LanceDB's mergeInsert of the same changelog (needs node and the LanceDB probe: make lance-probe)")
}

func (o Options) validate() error {
	if o.TableRows <= 0 || o.ChangeRows < 2 || o.Runs <= 0 || o.Runs > 10 {
		return errors.New("upsert: give --table-rows > 0, --change-rows >= 2 and 1 to 10 --upserts")
	}
	return nil
}

// Scenario is the upsert scenario for bench.Main.
func Scenario() bench.Scenario {
	return bench.NewScenario[Options]("upsert", "Delta upsert of a changelog, copy-on-write and with deletion vectors (--lancedb: vs LanceDB mergeInsert)", Run)
}

// mode is one way of running the upserts.
type mode struct {
	name            string
	deletionVectors bool
}

var modes = []mode{{"copy-on-write", false}, {"deletion-vectors", true}}

// Run runs the scenario and prints its report to out, progress to log.
func Run(ctx context.Context, o Options, out, log io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	var rows []row
	for _, m := range modes {
		rs, err := runMode(ctx, o, m, log)
		if err != nil {
			return fmt.Errorf("upsert %s: %w", m.name, err)
		}
		med := bench.MedianBy(rs, func(r run) float64 { return r.rowsPerSec })
		rows = append(rows, row{target: "quiver-" + m.name, run: med, runs: len(rs)})
	}
	if o.LanceDB {
		lance, err := lanceDBMerge(o, log)
		if err != nil {
			return fmt.Errorf("LanceDB mergeInsert: %w", err)
		}
		rows = append(rows, lance...)
	}
	return report(out, o, rows)
}

// run is one upsert.
type run struct {
	seconds, rowsPerSec       float64
	put, precommit, commit    float64 // seconds of each step
	rewritten, marked, added  int
	addedBytes                int64
	peakRSS                   int64 // bytes; -1 when unknown
	peakRSSSinceStart         bool  // the peak could not be reset: it covers the whole process
	tableRowsAfter, wantAfter int64
}

// runMode seeds a fresh table and upserts o.Runs changelogs into it.
func runMode(ctx context.Context, o Options, m mode, log io.Writer) (_ []run, err error) {
	dir, remove, err := bench.TempDir("quiverbench", "upsert table", false, log)
	if err != nil {
		return nil, err
	}
	defer remove()
	tableDir := filepath.Join(dir, "table")
	srv, err := startServer(ctx, dir, tableDir, o.Codec, m.deletionVectors)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, bench.Stop(ctx, srv)) }()
	c, err := quiver.Dial(srv.FlightAddr())
	if err != nil {
		return nil, err
	}
	defer c.Close()

	start := time.Now()
	if err := seed(ctx, c, o.TableRows); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "quiverbench: upsert %s: seeded %d rows in %.1fs\n", m.name, o.TableRows, time.Since(start).Seconds())
	var rs []run
	for round := range o.Runs {
		r, err := upsert(ctx, c, tableDir, o, round)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", round+1, err)
		}
		if r.tableRowsAfter != r.wantAfter {
			return nil, fmt.Errorf("run %d: the table holds %d rows afterwards, want %d", round+1, r.tableRowsAfter, r.wantAfter)
		}
		fmt.Fprintf(log, "quiverbench: upsert %s: run %d: %.0f rows/s (put %.0f ms, precommit %.0f ms, commit %.0f ms)\n",
			m.name, round+1, r.rowsPerSec, 1000*r.put, 1000*r.precommit, 1000*r.commit)
		rs = append(rs, r)
	}
	return rs, nil
}

// startServer serves the append endpoint seed and the upsert endpoint
// upsert (merge_keys [id]) on the table tableDir.
func startServer(ctx context.Context, dir, tableDir, codec string, dvs bool) (*server.Server, error) {
	var b strings.Builder
	endpoint := func(name, mode string) {
		fmt.Fprintf(&b, "  - name: %s\n    sink: delta\n    delta: {table_uri: \"file://%s\", %sdeletion_vectors: %v, parquet: {compression: %s}}\n",
			name, tableDir, mode, dvs, codec)
	}
	endpoint("seed", "")
	endpoint("upsert", "mode: upsert, merge_keys: [id], ")
	return bench.Start(ctx, dir, filepath.Join(dir, "data"), b.String())
}

// seed appends ids [0, rows) of the standard workload in one auto-commit
// stream.
func seed(ctx context.Context, c *quiver.Client, rows int64) error {
	batches, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, rows, workload.DefaultBatchRows)
	if err != nil {
		return err
	}
	defer workload.ReleaseAll(batches)
	rr, err := array.NewRecordReader(workload.Schema(), batches)
	if err != nil {
		return err
	}
	defer rr.Release()
	if _, err := c.Put(ctx, "seed", rr); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return nil
}

// upsert merges changelog round (workload.MergeSource) as transaction
// (quiverbench-upsert, round+1), timed, and reads back what it committed.
func upsert(ctx context.Context, c *quiver.Client, tableDir string, o Options, round int) (run, error) {
	batches, err := workload.MergeSource(memory.DefaultAllocator, o.TableRows, o.ChangeRows, round)
	if err != nil {
		return run{}, err
	}
	defer workload.ReleaseAll(batches)
	rr, err := array.NewRecordReader(workload.Schema(), batches)
	if err != nil {
		return run{}, err
	}
	defer rr.Release()
	debug.FreeOSMemory() // the peak RSS is the upsert's, not the generator's
	reset := bench.ResetPeakRSS()

	start := time.Now()
	tx := c.Txn("quiverbench-upsert", int64(round+1))
	if _, err := tx.Put(ctx, "upsert", rr); err != nil {
		return run{}, err
	}
	put := time.Now()
	if _, err := tx.Precommit(ctx); err != nil {
		return run{}, err
	}
	precommit := time.Now()
	st, err := tx.Commit(ctx, nil)
	if err != nil {
		return run{}, err
	}
	end := time.Now()
	elapsed := end.Sub(start).Seconds()
	r := run{seconds: elapsed, rowsPerSec: float64(o.ChangeRows) / elapsed, peakRSS: bench.PeakRSS(), peakRSSSinceStart: reset != nil,
		put: put.Sub(start).Seconds(), precommit: precommit.Sub(put).Seconds(), commit: end.Sub(precommit).Seconds(),
		wantAfter: o.TableRows + int64(round+1)*(o.ChangeRows-o.ChangeRows/2)}
	ec, ok := st.Endpoints["upsert"]
	if !ok || ec.Version == nil {
		return run{}, fmt.Errorf("commit answered no version: %+v", st)
	}
	return r, readCommit(ctx, tableDir, *ec.Version, &r)
}

// readCommit counts the files the commit at version rewrote, marked and
// added into r, with the table's live rows afterwards.
func readCommit(ctx context.Context, tableDir string, version int64, r *run) error {
	b, err := storage.Open(ctx, "file://"+tableDir, storage.Options{})
	if err != nil {
		return err
	}
	defer b.Close()
	actions, err := deltalog.ReadCommit(ctx, b, version)
	if err != nil {
		return err
	}
	removed := map[string]bool{}
	for _, a := range actions {
		if a.Remove != nil {
			removed[a.Remove.Path] = true
		}
	}
	for _, a := range actions {
		switch {
		case a.Add != nil && removed[a.Add.Path]:
			r.marked++
			delete(removed, a.Add.Path)
		case a.Add != nil:
			r.added++
			r.addedBytes += a.Add.Size
		}
	}
	r.rewritten = len(removed)
	snap, err := deltalog.LoadVersion(ctx, b, version)
	if err != nil {
		return err
	}
	for _, a := range snap.Files() {
		st, err := deltalog.ParseStats(a.Stats)
		if err != nil || st.NumRecords < 0 {
			return fmt.Errorf("file %s has no row count", a.Path)
		}
		r.tableRowsAfter += st.NumRecords
		if a.DeletionVector != nil {
			r.tableRowsAfter -= a.DeletionVector.Cardinality
		}
	}
	return nil
}
