package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quiver-ingest/quiver/internal/duckcheck"
	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

func upsertDVConfig(uri string) *Config {
	return testConfig(uri, func(c *Config) {
		c.WriteMode, c.MergeKeys, c.DeletionVectors = ModeUpsert, []string{"id"}, true
	})
}

// fileChanges sorts the remove and add actions of a commit by path: for
// each path the deletion vector removed and the one added (nil: none, or
// no such action).
type fileChange struct {
	removed, added   bool
	oldDV, newDV     *deltalog.DeletionVector
	addStats         string
	removeDataChange bool
}

func fileChanges(actions []deltalog.Action) map[string]*fileChange {
	out := map[string]*fileChange{}
	get := func(p string) *fileChange {
		if out[p] == nil {
			out[p] = &fileChange{}
		}
		return out[p]
	}
	for _, a := range actions {
		switch {
		case a.Remove != nil:
			c := get(a.Remove.Path)
			c.removed, c.oldDV, c.removeDataChange = true, a.Remove.DeletionVector, a.Remove.DataChange
		case a.Add != nil:
			c := get(a.Add.Path)
			c.added, c.newDV, c.addStats = true, a.Add.DeletionVector, a.Add.Stats
		}
	}
	return out
}

// TestUpsertDeletionVectors: in a table that enables deletion vectors an
// upsert keeps the files holding matched rows and marks those rows in new
// deletion vectors (merged with the old ones) instead of rewriting them; a
// file whose every row is gone is removed. Checkpoints keep the deletion
// vectors, and our reader and DuckDB agree with the model after each step.
func TestUpsertDeletionVectors(t *testing.T) {
	mem := checkedMem(t)
	cfg := upsertDVConfig(fileURI(t))
	cfg.CheckpointInterval = 2
	w := openWriter(t, cfg, mem)
	db := duckcheck.Open(t)
	cols := []string{"id", "str"}
	seedIDs(t, w, mem, [2]int32{0, 100})
	seed := snapshot(t, cfg).Files()[0].Path
	if p := snapshot(t, cfg).Protocol; !p.HasWriterFeature("deletionVectors") {
		t.Fatalf("new table protocol %+v lacks the deletionVectors feature", p)
	}

	rows := tableRows(t, cfg, cols)
	epoch := int64(0)
	upsert := func(changes ...idChange) map[string]*fileChange {
		t.Helper()
		epoch++
		rec := idBatch(mem, changes...)
		defer rec.Release()
		info := commitOne(t, w, writers.TxnKey{Writer: "dv", Epoch: epoch}, rec)
		rows = applyIDs(rows, changes)
		step := fmt.Sprintf("after upsert %d", epoch)
		sameRows(t, step+", our reader", tableRows(t, cfg, cols), rows)
		sameRows(t, step+", DuckDB", duckRows(t, db, cfg, cols), rows)
		return fileChanges(readCommit(t, cfg, info.Version))
	}

	// 1: two updates, a delete and an insert mark 3 rows of the seed file.
	changes := upsert(idChange{10, "ten", "U"}, idChange{20, "twenty", "U"}, idChange{30, "", "D"}, idChange{200, "new", "I"})
	c := changes[seed]
	if c == nil || !c.removed || !c.added || c.oldDV != nil || c.newDV == nil || c.newDV.Cardinality != 3 || !c.removeDataChange {
		t.Fatalf("seed file change %+v: want removed without and re-added with a 3-row deletion vector", c)
	}
	if st, err := deltalog.ParseStats(c.addStats); err != nil || st.TightBounds == nil || *st.TightBounds || st.NumRecords != 100 {
		t.Fatalf("re-added stats %q: want numRecords 100 and tightBounds false", c.addStats)
	}
	var live string
	for p, c := range changes {
		if p == seed {
			continue
		}
		if c.removed || !c.added || c.newDV != nil {
			t.Fatalf("file %s change %+v: only the live rows' new file is added besides the seed file", p, c)
		}
		live = p
	}
	if len(changes) != 2 {
		t.Fatalf("%d files changed, want the seed file and one new file", len(changes))
	}

	// 2: id 10 now lives in the new file; id 40 in the seed file: both
	// files get deletion vectors, the seed file's merged with its old one.
	changes = upsert(idChange{10, "ten again", "U"}, idChange{40, "forty", "U"})
	if c := changes[seed]; c == nil || c.oldDV == nil || c.oldDV.Cardinality != 3 || c.newDV == nil || c.newDV.Cardinality != 4 {
		t.Fatalf("seed file change %+v: want its 3-row deletion vector replaced by a 4-row one", c)
	}
	if c := changes[live]; c == nil || c.newDV == nil || c.newDV.Cardinality != 1 {
		t.Fatalf("first live file change %+v: want a 1-row deletion vector", c)
	}

	// 3: deleting every remaining seed row removes the seed file.
	var all []idChange
	for id := range int32(100) {
		all = append(all, idChange{id, "", "D"})
	}
	changes = upsert(all...)
	if c := changes[seed]; c == nil || !c.removed || c.added {
		t.Fatalf("seed file change %+v: want it removed, not re-added", c)
	}

	// Marked: the seed file (1, 2), the first live file (2, 3); removed:
	// the seed file and the second live file (3, all rows deleted).
	for action, want := range map[string]float64{"marked": 4, "removed": 2, "rewritten": 0} {
		if got := testutil.ToFloat64(w.m.upsertFiles.WithLabelValues(action)); got != want {
			t.Errorf("quiver_delta_upsert_files_total{action=%q} = %v, want %v", action, got, want)
		}
	}

	// The checkpoints (interval 2) kept the deletion vectors: a fresh
	// load from them reads the same rows.
	ctx := context.Background()
	b := tableBucket(t, cfg)
	last, err := b.Get(ctx, deltalog.LogDir+"_last_checkpoint")
	var hint struct{ Version int64 }
	if err == nil {
		err = json.Unmarshal(last, &hint)
	}
	if err != nil || hint.Version < 2 {
		t.Fatalf("_last_checkpoint %s, %v: want a checkpoint at version 2 or later", last, err)
	}
	sameRows(t, "fresh load", tableRows(t, cfg, cols), rows)
}

// TestUpsertDeletionVectorGolden: upserts into copies of tables written by
// Spark with deletion vectors honour them (a marked row is neither
// matched, copied nor resurrected): with deletion vectors (the tables
// enable them) and copy-on-write (after turning the property off).
func TestUpsertDeletionVectorGolden(t *testing.T) {
	small := []idChange{{3, "", "D"}, {0, "", "U"}, {20, "", "I"}} // 0 is marked deleted by Spark's DV
	for _, tc := range []struct {
		name, table string
		keys, cols  []string
		partition   []string
		copyOnWrite bool
		rec         func(memory.Allocator) arrow.RecordBatch
		apply       func(before []string) []string
	}{
		{
			name: "small", table: "dv-small", keys: []string{"value"}, cols: []string{"value"},
			rec:   func(mem memory.Allocator) arrow.RecordBatch { return valueBatch(mem, small) },
			apply: func(before []string) []string { return applyKeys(before, small) },
		},
		{
			name: "small-copy-on-write", table: "dv-small", keys: []string{"value"}, cols: []string{"value"}, copyOnWrite: true,
			rec:   func(mem memory.Allocator) arrow.RecordBatch { return valueBatch(mem, small) },
			apply: func(before []string) []string { return applyKeys(before, small) },
		},
		{
			// col1 2 is marked deleted by Spark; 1 and 3 are live.
			name: "partitioned-checkpoint", table: "dv-partitioned-checkpoint",
			keys: []string{"col1"}, cols: []string{"col1", "part", "col2"}, partition: []string{"part"},
			rec: func(mem memory.Allocator) arrow.RecordBatch {
				return partBatch(mem, []partChange{{1, "", "D"}, {3, "x", "U"}, {2, "back", "U"}, {100, "new", "I"}})
			},
			apply: func(before []string) []string {
				return applyKeys(before, []idChange{{1, "", "D"}, {3, "3|x", "U"}, {2, "2|back", "U"}, {100, "0|new", "I"}})
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			cfg := testConfig(goldenCopy(t, tc.table), func(c *Config) {
				c.WriteMode, c.MergeKeys, c.PartitionBy = ModeUpsert, tc.keys, tc.partition
			})
			if tc.copyOnWrite {
				setTableProperty(t, cfg, enableDVProperty, "false")
			}
			before := tableRows(t, cfg, tc.cols)
			w := openWriter(t, cfg, mem)
			rec := tc.rec(mem)
			defer rec.Release()
			info := commitOne(t, w, writers.TxnKey{Writer: "golden", Epoch: 1}, rec)
			want := tc.apply(before)
			sameRows(t, "our reader", tableRows(t, cfg, tc.cols), want)
			sameRows(t, "DuckDB", duckRows(t, duckcheck.Open(t), cfg, tc.cols), want)
			marked := 0
			for p, c := range fileChanges(readCommit(t, cfg, info.Version)) {
				if c.removed && c.added {
					marked++
					if c.newDV == nil || c.oldDV != nil && c.newDV.Cardinality <= c.oldDV.Cardinality {
						t.Errorf("file %s: deletion vector %+v → %+v, want one marking more rows", p, c.oldDV, c.newDV)
					}
				}
			}
			if tc.copyOnWrite != (marked == 0) {
				t.Errorf("%d files re-added with a new deletion vector; copy-on-write %v", marked, tc.copyOnWrite)
			}
		})
	}
}

// applyKeys folds changes into rows whose first "|"-field is the key: str
// is the rest of the row ("" for a single-column row).
func applyKeys(rows []string, changes []idChange) []string {
	out := map[string]string{}
	for _, r := range rows {
		out[strings.SplitN(r, "|", 2)[0]] = r
	}
	for _, c := range changes {
		k := itoa(c.id)
		switch {
		case c.op == "D":
			delete(out, k)
		case c.str == "":
			out[k] = k
		default:
			out[k] = k + "|" + c.str
		}
	}
	var list []string
	for _, r := range out {
		list = append(list, r)
	}
	return sortedCopy(list)
}

// valueBatch is a changelog of dv-small (value int32).
func valueBatch(mem memory.Allocator, rows []idChange) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{
		{Name: "value", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: merge.OpColumn, Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil))
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int32Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.op)
	}
	return b.NewRecordBatch()
}

// partChange is a changelog row of dv-partitioned-checkpoint: part is
// col1 % 10, as the table was generated.
type partChange struct {
	col1 int32
	col2 string
	op   string
}

func partBatch(mem memory.Allocator, rows []partChange) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{
		{Name: "part", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "col1", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "col2", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: merge.OpColumn, Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil))
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int32Builder).Append(r.col1 % 10)
		b.Field(1).(*array.Int32Builder).Append(r.col1)
		b.Field(2).(*array.StringBuilder).Append(r.col2)
		b.Field(3).(*array.StringBuilder).Append(r.op)
	}
	return b.NewRecordBatch()
}

// setTableProperty commits a metaData action setting one table property,
// as ALTER TABLE … SET TBLPROPERTIES does.
func setTableProperty(t *testing.T, cfg *Config, key, value string) {
	t.Helper()
	ctx := context.Background()
	b := tableBucket(t, cfg)
	snap := snapshot(t, cfg)
	m := snap.Metadata
	m.Configuration = map[string]string{}
	for k, v := range snap.Metadata.Configuration {
		m.Configuration[k] = v
	}
	m.Configuration[key] = value
	if _, err := deltalog.Commit(ctx, b, snap, []deltalog.Action{{MetaData: &m}}, deltalog.CommitOptions{Operation: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
}

// TestUpsertStaleDeletionVector: another upsert marks the same file
// between an upsert's precommit and its commit; the commit is Aborted
// (its deletion vector would drop the other's), and a replay succeeds.
func TestUpsertStaleDeletionVector(t *testing.T) {
	mem := checkedMem(t)
	ctx := context.Background()
	cfg := upsertDVConfig(memURI(t))
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 50})
	cols := []string{"id", "str"}
	key := writers.TxnKey{Writer: "stale", Epoch: 1}
	mine := []idChange{{20, "mine", "U"}}
	rec := idBatch(mem, mine...)
	defer rec.Release()
	d := precommitOne(t, w, key, rec)
	other := idBatch(mem, idChange{30, "other", "U"})
	defer other.Release()
	commitOne(t, openWriter(t, cfg, mem), writers.TxnKey{Writer: "other", Epoch: 1}, other)
	want := tableRows(t, cfg, cols)
	if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("stale Commit: %v, want ErrConflict", err)
	}
	sameRows(t, "after the abort", tableRows(t, cfg, cols), want)
	if err := w.Rollback(ctx, key); err != nil {
		t.Fatal(err)
	}
	commitOne(t, w, key, rec)
	sameRows(t, "after the replay", tableRows(t, cfg, cols), applyIDs(want, mine))
}

// TestDeletionVectorsConfig: deletion_vectors on an existing table that
// does not enable them is refused, naming the property.
func TestDeletionVectorsConfig(t *testing.T) {
	mem := checkedMem(t)
	ctx := context.Background()
	uri := memURI(t)
	w := openWriter(t, upsertIDConfig(uri), mem)
	seedIDs(t, w, mem, [2]int32{0, 5})
	dv, err := New(upsertDVConfig(uri), writers.Env{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer dv.Close(ctx)
	if err := dv.Open(ctx); !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), enableDVProperty) {
		t.Fatalf("Open with deletion_vectors on a table without them: %v, want ErrInvalid naming %s", err, enableDVProperty)
	}
}

// TestDiscardedUpsertKeepsTheTable: discarding a rolled-back upsert's
// precommit (deletion vectors: new files, a DV file, files it marks)
// deletes only what the precommit wrote: the files it read and would
// have marked or removed stay, the table reads as before, and its
// descriptor no longer commits.
func TestDiscardedUpsertKeepsTheTable(t *testing.T) {
	mem := checkedMem(t)
	cfg := upsertDVConfig(fileURI(t))
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 100})
	cols := []string{"id", "str"}
	before := tableRows(t, cfg, cols)

	key := writers.TxnKey{Writer: "dv", Epoch: 1}
	rec := idBatch(mem, idChange{10, "ten", "U"}, idChange{30, "", "D"}, idChange{200, "new", "I"})
	desc := precommitOne(t, w, key, rec)
	rec.Release()
	written, err := writtenFiles(desc)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) < 2 {
		t.Fatalf("the upsert's precommit wrote %v: want its new data file and its DV file", written)
	}
	if err := w.Rollback(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if err := w.DiscardPrecommitted(t.Context(), desc); err != nil {
		t.Fatal(err)
	}
	b := tableBucket(t, cfg)
	for _, o := range written {
		if _, err := b.Stat(t.Context(), o.Key); !errors.Is(err, storage.ErrNotExist) {
			t.Errorf("%s after the discard: %v, want gone", o.Key, err)
		}
	}
	sameRows(t, "after the discard", tableRows(t, cfg, cols), before)
	if _, err := w.Commit(t.Context(), key, []writers.Descriptor{desc}); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("commit of the discarded descriptor: %v, want ErrInvalid", err)
	}
}
