// Package mergeinsert is the Lance merge-insert benchmark of quiverbench
// (--scenario merge-insert): Quiver's
// merge_insert endpoint against LanceDB's mergeInsert on identical copies
// of one dataset, in the same run.
//
// LanceDB (@lancedb/lancedb through the LanceDB probe, internal/lanceprobe:
// node must be installed, and the probe: make lance-probe) creates a storage-2.0 dataset of --base-rows rows of the
// standard workload, copied three times: for Quiver, for LanceDB without
// an index and for LanceDB with a BTREE index on id. Then 1 + --warm-merges
// sources of --merge-rows rows (workload.MergeSource: half existing ids with
// new amount, score and name, half new ids) are merged on [id] with
// update_all + insert_all, in order, into every copy. Quiver's merges go
// through Flight to a server in process (one transaction each: put,
// precommit, commit, all timed); the first builds the endpoint's key index
// (cold), the later ones find it warm. LanceDB's time covers execute()
// alone (node reads the source before the clock starts), each in a new
// node process. The report gives rows/s (the median of the warm merges),
// Quiver's peak RSS per merge (the whole process, client and generated
// sources included; the peak is reset before each merge), and Quiver's
// ratios to LanceDB. All files live in a temporary folder removed at exit.
package mergeinsert

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/quiver-ingest/quiver/bench/workload"

	"github.com/quiver-ingest/quiver/bench"
)

// Options sizes the scenario.
type Options struct {
	BaseRows   int64  // rows of the dataset before the first merge
	SourceRows int64  // rows of each merge, half of them updates
	WarmMerges int    // merges after the first, with the key index warm
	Storage    string // LanceDB's data storage version of the base dataset ("" = 2.0)
}

// Register adds the scenario's flags (--base-rows, --merge-rows,
// --warm-merges) to fs, with the sizes as defaults.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.Int64Var(&o.BaseRows, "base-rows", 2_000_000, "merge-insert: rows of the dataset before the first merge")
	fs.Int64Var(&o.SourceRows, "merge-rows", 200_000, "merge-insert: rows of each merge (half existing ids, half new)")
	fs.IntVar(&o.WarmMerges, "warm-merges", 3, "merge-insert: merges after the first (warm key index); the median is reported")
	fs.StringVar(&o.Storage, "storage", "2.0", "merge-insert: LanceDB's data storage version of the base dataset (2.0 or 2.1; Quiver merges in the same)")
}

func (o Options) validate() error {
	if o.BaseRows <= 0 || o.SourceRows < 2 || o.WarmMerges < 0 {
		return errors.New("merge-insert: give --base-rows > 0, --merge-rows >= 2 and --warm-merges >= 0")
	}
	if o.Storage != "" && o.Storage != "2.0" && o.Storage != "2.1" {
		return errors.New("merge-insert: --storage is 2.0 or 2.1 (what LanceDB 0.31 creates)")
	}
	return nil
}

// Scenario is the merge-insert scenario for bench.Main.
func Scenario() bench.Scenario {
	return bench.NewScenario[Options]("merge-insert", "Lance merge_insert (cold and warm key index) vs LanceDB mergeInsert (needs node)", Run)
}

// Run runs the scenario and prints its report to out, progress to log.
func Run(ctx context.Context, o Options, out, log io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "quiverbench-merge-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lance, err := newLanceDB(dir, o.Storage)
	if err != nil {
		return err
	}
	if err := lance.createBase(o.BaseRows, log); err != nil {
		return err
	}
	srcs, err := writeSources(dir, o)
	if err != nil {
		return err
	}
	// Give the memory of the generated data back to the system, so that
	// the peak RSS of the merges is not the generator's.
	debug.FreeOSMemory()
	quiver, err := quiverMerges(ctx, dir, lance.path(quiverTable), o, log)
	if err != nil {
		return err
	}
	res := []result{quiver}
	for _, t := range []string{plainTable, indexedTable} {
		r, err := lance.merges(t, srcs, o.SourceRows, log)
		if err != nil {
			return err
		}
		res = append(res, r)
	}
	return report(out, o, res)
}

// writeSources writes the scenario's sources as Arrow IPC files for
// LanceDB; Quiver's side builds the same batches again in memory.
func writeSources(dir string, o Options) ([]string, error) {
	files := make([]string, 1+o.WarmMerges)
	for i := range files {
		recs, err := workload.MergeSource(memoryAllocator, o.BaseRows, o.SourceRows, i)
		if err != nil {
			return nil, err
		}
		files[i] = filepath.Join(dir, fmt.Sprintf("source%d.arrow", i))
		err = writeIPC(files[i], recs)
		workload.ReleaseAll(recs)
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}
