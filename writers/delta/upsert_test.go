package delta

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// idSchema is the shape of the golden basic-* tables: id int32, str utf8,
// plus _op.
func idSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "str", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: merge.OpColumn, Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}

// idChange is one row of an idSchema changelog.
type idChange struct {
	id  int32
	str string
	op  string
}

func idBatch(mem memory.Allocator, rows ...idChange) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, idSchema())
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int32Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.str)
		b.Field(2).(*array.StringBuilder).Append(r.op)
	}
	return b.NewRecordBatch()
}

// idRange returns upserts of ids lo..hi-1 with str.
func idRange(lo, hi int32, str string) []idChange {
	var out []idChange
	for id := lo; id < hi; id++ {
		out = append(out, idChange{id, str, "U"})
	}
	return out
}

// applyIDs folds changes (no repeated ids) into rows "id|str".
func applyIDs(rows []string, changes []idChange) []string {
	m := map[string]string{}
	for _, r := range rows {
		m[strings.SplitN(r, "|", 2)[0]] = r
	}
	for _, c := range changes {
		id := itoa(c.id)
		if c.op == "D" {
			delete(m, id)
		} else {
			m[id] = id + "|" + c.str
		}
	}
	out := make([]string, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	return sortedCopy(out)
}

func upsertIDConfig(uri string) *Config {
	return testConfig(uri, func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"id"} })
}

// seedIDs upserts ids [lo, hi) per range, one commit (one file) each.
func seedIDs(t *testing.T, w *Writer, mem memory.Allocator, ranges ...[2]int32) {
	t.Helper()
	for i, r := range ranges {
		rec := idBatch(mem, idRange(r[0], r[1], "seed")...)
		commitOne(t, w, writers.AutoKey("seed"+itoa(int32(i))), rec)
		rec.Release()
	}
}

// TestUpsertGolden: upserts into copies of Spark-written tables (after an
// UPDATE and after a MERGE) update, delete and insert, and read back as
// the model says.
func TestUpsertGolden(t *testing.T) {
	for _, name := range []string{"basic-update", "basic-merge"} {
		t.Run(name, func(t *testing.T) {
			mem := checkedMem(t)
			cfg := upsertIDConfig(goldenCopy(t, name))
			cols := []string{"id", "str"}
			before := tableRows(t, cfg, cols)
			if len(before) < 100 {
				t.Fatalf("golden table read back %d rows", len(before))
			}
			w := openWriter(t, cfg, mem)
			changes := append(idRange(45, 55, "upserted"), idChange{1, "", "D"}, idChange{12, "", "D"},
				idChange{500, "new", "I"}, idChange{-7, "", "D"})
			rec := idBatch(mem, changes...)
			defer rec.Release()
			commitOne(t, w, writers.TxnKey{Writer: "golden", Epoch: 1}, rec)
			sameRows(t, "after upsert", tableRows(t, cfg, cols), applyIDs(before, changes))
		})
	}
}

// TestUpsertPruning: an upsert whose keys all fall in one file of three
// rewrites only that file; the others' adds stay active, untouched.
func TestUpsertPruning(t *testing.T) {
	mem := checkedMem(t)
	cfg := upsertIDConfig(memURI(t))
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 100}, [2]int32{100, 200}, [2]int32{200, 300})
	before := snapshot(t, cfg)
	var target *deltalog.Add
	for _, a := range before.Files() {
		if st, _ := deltalog.ParseStats(a.Stats); st != nil {
			if lo, _ := st.Min("id"); lo != nil && lo.(interface{ String() string }).String() == "100" {
				target = a
			}
		}
	}
	if target == nil || before.NumFiles() != 3 {
		t.Fatalf("seed: %d files, none holding ids from 100", before.NumFiles())
	}
	rec := idBatch(mem, idChange{150, "x", "U"}, idChange{160, "", "D"}, idChange{1000, "new", "I"}, idChange{-5, "", "D"})
	defer rec.Release()
	info := commitOne(t, w, writers.TxnKey{Writer: "prune", Epoch: 1}, rec)

	actions := readCommit(t, cfg, info.Version)
	var removed []string
	for _, a := range actions {
		if a.Remove != nil {
			removed = append(removed, a.Remove.Path)
			if !a.Remove.DataChange || a.Remove.Size == nil || *a.Remove.Size != target.Size || a.Remove.DeletionTimestamp == nil || !a.Remove.ExtendedFileMetadata {
				t.Errorf("remove %+v lacks dataChange, size, deletionTimestamp or extendedFileMetadata", a.Remove)
			}
		}
		if a.CommitInfo != nil && (a.CommitInfo.Operation != "MERGE" || a.CommitInfo.IsBlindAppend == nil || *a.CommitInfo.IsBlindAppend) {
			t.Errorf("commitInfo %+v: want operation MERGE, not a blind append", a.CommitInfo)
		}
	}
	if len(removed) != 1 || removed[0] != target.Path {
		t.Fatalf("removed %q, want only %q", removed, target.Path)
	}
	after := snapshot(t, cfg)
	active := map[string]bool{}
	for _, a := range after.Files() {
		active[a.Path] = true
	}
	for _, a := range before.Files() {
		if a.Path != target.Path && !active[a.Path] {
			t.Errorf("unmatched file %s was rewritten", a.Path)
		}
	}
	if got := publishedRows(t, cfg); got != 300 { // -1 deleted, +1 inserted
		t.Fatalf("%d rows after the upsert, want 300", got)
	}
}

// readCommit returns the actions of version v of cfg's table.
func readCommit(t *testing.T, cfg *Config, v int64) []deltalog.Action {
	t.Helper()
	ctx := context.Background()
	b := tableBucket(t, cfg)
	actions, err := deltalog.ReadCommit(ctx, b, v)
	if err != nil {
		t.Fatal(err)
	}
	return actions
}

// TestUpsertExactlyOnce: a descriptor committed by a restarted writer (a
// crash between precommit and commit) publishes once; committing it again
// is a replay that adds no version.
func TestUpsertExactlyOnce(t *testing.T) {
	mem := checkedMem(t)
	ctx := context.Background()
	cfg := upsertIDConfig(fileURI(t))
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 50})
	key := writers.TxnKey{Writer: "eo", Epoch: 3}
	changes := []idChange{{10, "ten", "U"}, {11, "", "D"}, {60, "sixty", "I"}}
	rec := idBatch(mem, changes...)
	defer rec.Release()
	d := precommitOne(t, w, key, rec)
	if again, err := w.Precommit(ctx, key); err != nil || string(again) != string(d) {
		t.Fatalf("repeated Precommit: %v, descriptor changed: %v", err, string(again) != string(d))
	}
	if err := w.Write(ctx, key, rec); !errors.Is(err, writers.ErrWrongState) {
		t.Fatalf("Write after Precommit: %v, want ErrWrongState", err)
	}
	want := applyIDs(tableRows(t, cfg, []string{"id", "str"}), changes)

	// "Crash": a new writer commits the descriptor.
	peer := openWriter(t, cfg, mem)
	info, err := peer.Commit(ctx, key, []writers.Descriptor{d})
	if err != nil || info.Replayed {
		t.Fatalf("Commit by a restarted writer: %+v, %v", info, err)
	}
	sameRows(t, "after commit", tableRows(t, cfg, []string{"id", "str"}), want)
	for _, c := range []*Writer{peer, w} {
		again, err := c.Commit(ctx, key, []writers.Descriptor{d})
		if err != nil || !again.Replayed || again.Version != info.Version {
			t.Fatalf("replayed Commit: %+v, %v; want Replayed at version %d", again, err, info.Version)
		}
	}
	if v := snapshot(t, cfg).Version; v != info.Version {
		t.Fatalf("table at version %d after replays, want %d", v, info.Version)
	}
	sameRows(t, "after replays", tableRows(t, cfg, []string{"id", "str"}), want)
}

// TestUpsertStaleRewrite: between an upsert's precommit and its commit,
// another writer rewrites (or appends to) the table; the commit is
// Aborted (ErrConflict), publishes nothing, and the table keeps the other
// writer's result without duplicates.
func TestUpsertStaleRewrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other func(t *testing.T, w *Writer, mem memory.Allocator)
		// want is the table after the other writer, as ids upserted
		want []idChange
	}{
		{"overlapping-rewrite", func(t *testing.T, w *Writer, mem memory.Allocator) {
			rec := idBatch(mem, idChange{20, "other", "U"})
			defer rec.Release()
			commitOne(t, w, writers.TxnKey{Writer: "other", Epoch: 1}, rec)
		}, []idChange{{20, "other", "U"}}},
		{"concurrent-append", func(t *testing.T, w *Writer, mem memory.Allocator) {
			app := openWriter(t, testConfig(w.cfg.TableURI), mem)
			full := idBatch(mem, idChange{70, "appended", "I"})
			defer full.Release()
			rec := array.NewRecordBatch(arrow.NewSchema(idSchema().Fields()[:2], nil), full.Columns()[:2], full.NumRows())
			defer rec.Release()
			commitOne(t, app, writers.TxnKey{Writer: "appender", Epoch: 1}, rec)
		}, []idChange{{70, "appended", "I"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			ctx := context.Background()
			cfg := upsertIDConfig(memURI(t))
			w := openWriter(t, cfg, mem)
			seedIDs(t, w, mem, [2]int32{0, 50})
			cols := []string{"id", "str"}
			key := writers.TxnKey{Writer: "stale", Epoch: 1}
			rec := idBatch(mem, idChange{20, "mine", "U"}, idChange{70, "mine", "I"})
			defer rec.Release()
			d := precommitOne(t, w, key, rec)
			other := openWriter(t, cfg, mem)
			tc.other(t, other, mem)
			want := tableRows(t, cfg, cols)
			version := snapshot(t, cfg).Version

			_, err := w.Commit(ctx, key, []writers.Descriptor{d})
			if !errors.Is(err, writers.ErrConflict) || !strings.Contains(err.Error(), "replay") {
				t.Fatalf("stale Commit: %v, want ErrConflict telling to replay", err)
			}
			if v := snapshot(t, cfg).Version; v != version {
				t.Fatalf("the aborted commit published version %d", v)
			}
			sameRows(t, "after the abort", tableRows(t, cfg, cols), want)
			if _, ok := snapshot(t, cfg).TxnVersion("stale"); ok {
				t.Fatal("the aborted upsert recorded its txn")
			}
			// Replaying the transaction from scratch succeeds.
			if err := w.Rollback(ctx, key); err != nil {
				t.Fatal(err)
			}
			commitOne(t, w, key, rec)
			sameRows(t, "after the replay", tableRows(t, cfg, cols), applyIDs(want, []idChange{{20, "mine", "U"}, {70, "mine", "I"}}))
		})
	}
}

// TestUpsertBadInput: bad changelogs are InvalidArgument naming the
// problem, and the table is unchanged.
func TestUpsertBadInput(t *testing.T) {
	mem := checkedMem(t)
	ctx := context.Background()
	cfg := upsertIDConfig(memURI(t))
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 10})
	version := snapshot(t, cfg).Version

	build := func(fields []arrow.Field, fill func(b *array.RecordBuilder)) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
		defer b.Release()
		fill(b)
		return b.NewRecordBatch()
	}
	id := arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int32, Nullable: true}
	str := arrow.Field{Name: "str", Type: arrow.BinaryTypes.String, Nullable: true}
	op := arrow.Field{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true}
	for _, tc := range []struct {
		name string
		rec  arrow.RecordBatch
		want string
	}{
		{"unknown-op", build([]arrow.Field{id, str, op}, func(b *array.RecordBuilder) {
			b.Field(0).(*array.Int32Builder).AppendValues([]int32{1, 2}, nil)
			b.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
			b.Field(2).(*array.StringBuilder).AppendValues([]string{"U", "X"}, nil)
		}), `row 1`},
		{"null-key", build([]arrow.Field{id, str}, func(b *array.RecordBuilder) {
			b.Field(0).(*array.Int32Builder).AppendValues([]int32{1, 0, 3}, []bool{true, true, false})
			b.Field(1).(*array.StringBuilder).AppendValues([]string{"a", "b", "c"}, nil)
		}), `row 2`},
		{"missing-key", build([]arrow.Field{str}, func(b *array.RecordBuilder) {
			b.Field(0).(*array.StringBuilder).Append("a")
		}), `"id"`},
		{"op-type", build([]arrow.Field{id, str, {Name: "_op", Type: arrow.PrimitiveTypes.Int32}}, func(b *array.RecordBuilder) {
			b.Field(0).(*array.Int32Builder).Append(1)
			b.Field(1).(*array.StringBuilder).Append("a")
			b.Field(2).(*array.Int32Builder).Append(1)
		}), `"_op"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.rec.Release()
			key := writers.AutoKey("bad-" + tc.name)
			err := w.Write(ctx, key, tc.rec)
			if err == nil {
				t.Fatal("Write accepted the batch")
			}
			if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Write: %v, want ErrInvalid containing %s", err, tc.want)
			}
			if err := w.CheckSchema(ctx, tc.rec.Schema()); tc.name == "missing-key" || tc.name == "op-type" {
				if !errors.Is(err, writers.ErrInvalid) {
					t.Fatalf("CheckSchema: %v, want ErrInvalid", err)
				}
			}
			if err := w.Rollback(ctx, key); err != nil {
				t.Fatal(err)
			}
			if v := snapshot(t, cfg).Version; v != version {
				t.Fatalf("table at version %d, want %d (unchanged)", v, version)
			}
		})
	}
}
