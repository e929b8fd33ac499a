package mergeinsert

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/quiver-ingest/quiver/bench/workload"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/lanceprobe"
)

// The copies of the base dataset, one per target.
const (
	baseTable    = "base"
	quiverTable  = "quiver"
	plainTable   = "lancedb"
	indexedTable = "lancedb-btree"
)

// memoryAllocator allocates the scenario's generated batches.
var memoryAllocator = memory.DefaultAllocator

// lanceDB is the LanceDB side: a database folder of the probe.
type lanceDB struct {
	probe, db string
	storage   string // data storage version of the base dataset
}

// newLanceDB returns the LanceDB side; storage "" means 2.0.
func newLanceDB(dir, storage string) (*lanceDB, error) {
	if storage == "" {
		storage = "2.0"
	}
	probe, err := lanceprobe.Dir()
	if err != nil {
		return nil, fmt.Errorf("merge-insert: LanceDB creates the dataset and is the reference: %w", err)
	}
	return &lanceDB{probe: probe, db: filepath.Join(dir, "db"), storage: storage}, nil
}

// path returns the dataset folder of table.
func (l *lanceDB) path(table string) string { return filepath.Join(l.db, table+".lance") }

// createBase lets LanceDB create the base dataset of rows rows, copies it
// for every target and gives the indexed copy its BTREE index on id.
func (l *lanceDB) createBase(rows int64, log io.Writer) error {
	recs, err := workload.Generate(memoryAllocator, workload.DefaultSeed, rows, workload.DefaultBatchRows)
	if err != nil {
		return err
	}
	file := filepath.Join(filepath.Dir(l.db), "base.arrow")
	err = writeIPC(file, recs)
	workload.ReleaseAll(recs)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "merge-insert: LanceDB creates the %d-row base dataset\n", rows)
	var created struct{ Rows int64 }
	if err := lanceprobe.NodeJSON(l.probe, lanceprobe.Script, &created, "create-ipc", l.db, baseTable, file, "--storage", l.storage); err != nil {
		return fmt.Errorf("lancedb createTable: %w", err)
	}
	if created.Rows != rows {
		return fmt.Errorf("lancedb createTable made %d rows, want %d", created.Rows, rows)
	}
	for _, t := range []string{quiverTable, plainTable, indexedTable} {
		if err := os.CopyFS(l.path(t), os.DirFS(l.path(baseTable))); err != nil {
			return err
		}
	}
	if out, err := lanceprobe.Node(l.probe, lanceprobe.Script, "index", l.db, indexedTable, "--column", "id"); err != nil {
		return fmt.Errorf("lancedb createIndex: %w\n%s", err, out)
	}
	return nil
}

// merges runs LanceDB's mergeInsert of every source file into table, in
// order, each in a new node process.
func (l *lanceDB) merges(table string, files []string, rows int64, log io.Writer) (result, error) {
	r := result{target: table, coldRSS: -1, warmRSS: -1}
	for i, file := range files {
		var res struct {
			Error string
			MS    float64
		}
		if err := lanceprobe.NodeJSON(l.probe, lanceprobe.Script, &res, "merge-insert", l.db, table, file, "--on", "id"); err != nil {
			return result{}, fmt.Errorf("lancedb mergeInsert: %w", err)
		}
		if res.Error != "" || res.MS <= 0 {
			return result{}, fmt.Errorf("lancedb mergeInsert into %s: %s (%.1f ms)", table, res.Error, res.MS)
		}
		rate := float64(rows) / (res.MS / 1000)
		fmt.Fprintf(log, "merge-insert: %s merge %d: %.0f rows/s\n", table, i+1, rate)
		r.add(i, rate, -1)
	}
	return r, nil
}

// writeIPC writes batches of the standard workload to an Arrow IPC file.
func writeIPC(file string, recs []arrow.RecordBatch) error {
	return lanceprobe.WriteIPC(file, workload.Schema(), recs)
}
