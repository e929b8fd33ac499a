package lance

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// seededIDMerge returns a merge writer (on id, update_all + insert_all)
// of a dataset seedDiff made in a new directory, and its checked
// allocator; the test's end closes the writer and checks the allocator.
func seededIDMerge(t *testing.T) (*Writer, string, *memory.CheckedAllocator) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	dir := t.TempDir()
	seedDiff(t, dir, mem)
	w := mergeWriter(t, dir, mem, []string{"id"}, [3]string{"update_all", "insert_all", "keep"})
	t.Cleanup(func() { w.Close(context.Background()) })
	return w, dir, mem
}

// seedDiff creates a dataset of ids 0..9 (two fragments) in dir.
func seedDiff(t *testing.T, dir string, mem memory.Allocator) {
	t.Helper()
	w := newWriter(t, dir, mem)
	defer w.Close(context.Background())
	for _, r := range [][2]int{{0, 5}, {5, 10}} {
		var rows []diffRow
		for i := r[0]; i < r[1]; i++ {
			rows = append(rows, diffRow{id: int64(i), k2: "a", val: float64(i), name: fmt.Sprintf("r%d", i)})
		}
		rec := diffRecord(mem, rows)
		commitRows(t, w, writers.AutoKey("seed"), rec)
		rec.Release()
	}
}

// diffState returns id -> name of every live row.
func diffState(t *testing.T, w *Writer, mem memory.Allocator) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	eachLiveRecord(t, w, mem, func(rec arrow.RecordBatch) {
		for r := range int(rec.NumRows()) {
			id := rec.Column(0).(*array.Int64).Value(r)
			if _, dup := out[id]; dup {
				t.Fatalf("id %d is live twice", id)
			}
			out[id] = rec.Column(3).ValueStr(r)
		}
	})
	return out
}

// opRecord builds a changelog source: rows of diffSchema plus _op.
func opRecord(mem memory.Allocator, ids []int64, ops []string) arrow.RecordBatch {
	fields := append(diffSchema().Fields(), arrow.Field{Name: "_op", Type: arrow.BinaryTypes.String})
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append("a")
		b.Field(2).(*array.Float64Builder).Append(-1)
		b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("%s%d", ops[i], id))
		b.Field(4).(*array.StringBuilder).Append(ops[i])
	}
	return b.NewRecordBatch()
}

func names(ids ...int64) func(string) map[int64]string {
	return func(prefix string) map[int64]string {
		m := map[int64]string{}
		for _, id := range ids {
			m[id] = fmt.Sprintf("%s%d", prefix, id)
		}
		return m
	}
}

// TestMergeInsertOptions checks the options LanceDB's JS API cannot drive
// (fail, delete, first_seen) and the _op composition against the model of
// docs/lance.md, starting from ids 0..9 named r<id>.
func TestMergeInsertOptions(t *testing.T) {
	base := names(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)("r")
	with := func(edit func(m map[int64]string)) map[int64]string {
		m := maps.Clone(base)
		edit(m)
		return m
	}
	src := func(ids ...int64) []diffRow {
		var rows []diffRow
		for _, id := range ids {
			rows = append(rows, diffRow{id: id, k2: "a", val: float64(id), name: fmt.Sprintf("s%d", id)})
		}
		return rows
	}
	for _, tc := range []struct {
		name    string
		opts    [4]string // when_matched, when_not_matched, by_source, source_duplicates
		rows    []diffRow
		want    map[int64]string
		counts  mergeCounts
		wantErr string
	}{
		{name: "delete matched", opts: [4]string{"delete", "insert_all", "keep", "fail"}, rows: src(1, 2, 20),
			want: with(func(m map[int64]string) { delete(m, 1); delete(m, 2); m[20] = "s20" }), counts: mergeCounts{Inserted: 1, Deleted: 2}},
		{name: "fail on match", opts: [4]string{"fail", "insert_all", "keep", "fail"}, rows: src(20, 3),
			wantErr: "found a matching row with key values id = 3, k2 = a"},
		{name: "fail without match inserts", opts: [4]string{"fail", "insert_all", "keep", "fail"}, rows: src(20, 21),
			want: with(func(m map[int64]string) { m[20], m[21] = "s20", "s21" }), counts: mergeCounts{Inserted: 2}},
		{name: "duplicate update fails", opts: [4]string{"update_all", "insert_all", "keep", "fail"}, rows: src(4, 20, 4),
			wantErr: "multiple source rows have the key (id = 4, k2 = a)"},
		{name: "duplicate insert fails", opts: [4]string{"update_all", "insert_all", "keep", "fail"}, rows: src(20, 20),
			wantErr: "multiple source rows have the key (id = 20, k2 = a)"},
		{name: "first_seen keeps the first", opts: [4]string{"update_all", "insert_all", "keep", "first_seen"},
			rows: append(src(4, 20), diffRow{id: 4, k2: "a", name: "late"}, diffRow{id: 20, k2: "a", name: "late"}),
			want: with(func(m map[int64]string) { m[4], m[20] = "s4", "s20" }), counts: mergeCounts{Inserted: 1, Updated: 1, Skipped: 2}},
		{name: "first_seen delete", opts: [4]string{"delete", "do_nothing", "keep", "first_seen"}, rows: src(4, 4, 20),
			want: with(func(m map[int64]string) { delete(m, 4) }), counts: mergeCounts{Deleted: 1, Skipped: 1}},
		{name: "by source delete empties a fragment", opts: [4]string{"do_nothing", "do_nothing", "delete", "fail"}, rows: src(7),
			want: map[int64]string{7: "r7"}, counts: mergeCounts{Deleted: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			dir := t.TempDir()
			seedDiff(t, dir, mem)
			w := mergeWriter(t, dir, mem, []string{"id", "k2"}, [3]string{tc.opts[0], tc.opts[1], tc.opts[2]})
			defer w.Close(context.Background())
			w.cfg.SourceDuplicates = tc.opts[3]
			rec := diffRecord(mem, tc.rows)
			defer rec.Release()
			before := dataFiles(t, dir)
			info, err := mergeRows(w, 1, rec)
			if tc.wantErr != "" {
				if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("merge error %v, want ErrInvalid with %q", err, tc.wantErr)
				}
				if got := diffState(t, w, mem); !maps.Equal(got, base) {
					t.Fatalf("a failed merge changed the dataset: %v", got)
				}
				if after := dataFiles(t, dir); !slices.Equal(before, after) {
					t.Fatalf("a failed merge left files: before %v, after %v", before, after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if info.Version != 3 {
				t.Fatalf("merge made version %d, want 3", info.Version)
			}
			if got := diffState(t, w, mem); !maps.Equal(got, tc.want) {
				t.Fatalf("rows = %v, want %v", got, tc.want)
			}
			if got := mergeCountsOf(w); got != tc.counts {
				t.Fatalf("merge metrics %+v, want %+v", got, tc.counts)
			}
		})
	}
}

// TestMergeInsertChangelog: _op D deletes a matched key whatever
// when_matched says and is a no-op for an unmatched one; a key's last
// changelog row wins, so a changelog never has duplicates.
func TestMergeInsertChangelog(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	seedDiff(t, dir, mem)
	w := mergeWriter(t, dir, mem, []string{"id"}, [3]string{"do_nothing", "insert_all", "keep"})
	defer w.Close(context.Background())
	rec := opRecord(mem, []int64{1, 2, 2, 3, 3, 30, 31, 31}, []string{"D", "U", "D", "D", "U", "D", "I", "U"})
	defer rec.Release()
	if _, err := mergeRows(w, 1, rec); err != nil {
		t.Fatal(err)
	}
	want := names(0, 3, 4, 5, 6, 7, 8, 9)("r")
	want[31] = "U31"
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
}

// TestMergeInsertBadInput: null key, missing key column, key type
// mismatch are ErrInvalid and leave the dataset unchanged.
func TestMergeInsertBadInput(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	seedDiff(t, dir, mem)
	ctx := context.Background()
	nullKey := func() arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, diffSchema().Field(1), diffSchema().Field(2), diffSchema().Field(3)}, nil))
		defer b.Release()
		b.Field(0).AppendNull()
		b.Field(1).(*array.StringBuilder).Append("a")
		b.Field(2).AppendNull()
		b.Field(3).AppendNull()
		return b.NewRecordBatch()
	}
	typed := func() arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.BinaryTypes.String}, diffSchema().Field(1), diffSchema().Field(2), diffSchema().Field(3)}, nil))
		defer b.Release()
		b.Field(0).(*array.StringBuilder).Append("1")
		b.Field(1).(*array.StringBuilder).Append("a")
		b.Field(2).AppendNull()
		b.Field(3).AppendNull()
		return b.NewRecordBatch()
	}
	for _, tc := range []struct {
		name string
		on   []string
		rec  func() arrow.RecordBatch
		want string
	}{
		{"null key", []string{"id"}, nullKey, "null"},
		{"missing key column", []string{"nope"}, func() arrow.RecordBatch { return diffRecord(mem, []diffRow{{id: 1}}) }, "nope"},
		{"key type mismatch", []string{"id"}, typed, `"id"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := mergeWriter(t, dir, mem, tc.on, [3]string{"update_all", "insert_all", "keep"})
			defer w.Close(ctx)
			rec := tc.rec()
			defer rec.Release()
			_, err := mergeRows(w, 1, rec)
			if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalid naming %s", err, tc.want)
			}
			if got := diffState(t, w, mem); !maps.Equal(got, names(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)("r")) {
				t.Fatalf("dataset changed: %v", got)
			}
		})
	}
}

// TestMergeInsertMixedStreams: a transaction whose first stream is plain
// and whose second is a changelog merges the rows of both (the plain
// source built as it arrived is dropped for the encoding of all batches
// at Precommit), writing one data file.
func TestMergeInsertMixedStreams(t *testing.T) {
	w, dir, mem := seededIDMerge(t)
	ctx := context.Background()
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	plain := diffRecord(mem, []diffRow{{id: 1, k2: "a", name: "p1"}})
	defer plain.Release()
	changes := opRecord(mem, []int64{40}, []string{"I"})
	defer changes.Release()
	before := len(onlyData(dataFiles(t, dir)))
	for _, rec := range []arrow.RecordBatch{plain, changes} {
		if err := w.Write(ctx, key, rec); err != nil {
			t.Fatal(err)
		}
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatal(err)
	}
	want := names(0, 2, 3, 4, 5, 6, 7, 8, 9)("r")
	want[1], want[40] = "p1", "I40"
	checkMerged(t, w, dir, mem, want, before)
}

// TestMergeInsertTargetNullKey: a target row whose int64 key is null
// (another writer's) fails the merge naming the null, through the scan
// that matches int64 keys without encoding them (scanInt64 hands such a
// fragment to the generic scan), and leaves the dataset as it was.
func TestMergeInsertTargetNullKey(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	rec := func(ids []int64, valid []bool) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, valid)
		for range ids {
			b.Field(1).(*array.StringBuilder).Append("seed")
		}
		return b.NewRecordBatch()
	}
	w := newWriter(t, dir, mem)
	seed := rec([]int64{1, 2, 3, 4}, []bool{true, true, false, true})
	commitRows(t, w, writers.AutoKey("seed"), seed)
	seed.Release()
	w.Close(ctx)

	m := mergeWriter(t, dir, mem, []string{"id"}, [3]string{"update_all", "insert_all", "keep"})
	defer m.Close(ctx)
	change := rec([]int64{2, 9}, nil)
	defer change.Release()
	before := dataFiles(t, dir)
	_, err := mergeRows(m, 1, change)
	if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "null") {
		t.Fatalf("error %v, want ErrInvalid naming the null key", err)
	}
	// The output the merge wrote while it scanned is gone with it.
	if after := dataFiles(t, dir); !slices.Equal(before, after) {
		t.Fatalf("the failed merge left files: before %v, after %v", before, after)
	}
}

// TestMergePrecommitRetried: a merge's precommit that fails (the store
// does not answer) keeps the transaction's source and leaves no file
// behind; the retry merges all of it, and the commit publishes it once.
func TestMergePrecommitRetried(t *testing.T) {
	w, dir, mem := seededIDMerge(t)
	ctx := context.Background()
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	rec := id3And30New(mem)
	defer rec.Release()
	before := dataFiles(t, dir)
	if err := w.Write(ctx, key, rec); err != nil { // starts writing the output
		t.Fatal(err)
	}
	w.bucket.SetFault(func(ctx context.Context, op, key string, do func() error) error {
		return errors.New("the store did not answer")
	})
	if _, err := w.Precommit(ctx, key); err == nil {
		t.Fatal("precommit passed without its store")
	}
	w.bucket.SetFault(nil)
	if after := dataFiles(t, dir); !slices.Equal(before, after) {
		t.Fatalf("the failed precommit left files: before %v, after %v", before, after)
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
		t.Fatal(err)
	}
	wantIDs3And30New(t, w, mem)
}

// TestMergePrecommitRepeated: a transaction's precommit is retried when
// another participant (or the journal) failed it. A merge's second
// Precommit returned a descriptor of nothing (its source was released by
// the first), and the commit published the epoch without its rows. It now
// returns the first descriptor, and the key takes no more rows.
func TestMergePrecommitRepeated(t *testing.T) {
	w, _, mem := seededIDMerge(t)
	ctx := context.Background()
	key := writers.TxnKey{Writer: "job", Epoch: 1}
	rec := id3And30New(mem)
	defer rec.Release()
	if err := w.Write(ctx, key, rec); err != nil {
		t.Fatal(err)
	}
	first, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	second, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("a repeated Precommit returned %s, the first %s", second, first)
	}
	if err := w.Write(ctx, key, rec); !errors.Is(err, writers.ErrWrongState) {
		t.Fatalf("a write after the precommit: %v, want ErrWrongState", err)
	}
	if _, err := w.Commit(ctx, key, []writers.Descriptor{second}); err != nil {
		t.Fatal(err)
	}
	wantIDs3And30New(t, w, mem)
}

// TestMergeEagerOutRewritten: a merge's output is written while its
// targets are found, guessing one row per source row; when the target
// holds a key twice (update_all writes a row per target row), the guess
// is dropped and the planned rows written instead: the dataset has both
// updated rows, and no file of the guess is left behind.
func TestMergeEagerOutRewritten(t *testing.T) {
	w, dir, mem := seededIDMerge(t) // ids 0..9
	other := newWriter(t, dir, mem)
	dup := diffRecord(mem, []diffRow{{id: 7, k2: "a", val: 70, name: "again"}})
	commitRows(t, other, writers.AutoKey("dup"), dup)
	dup.Release()
	other.Close(context.Background())
	rec := diffRecord(mem, []diffRow{{id: 7, k2: "b", val: -7, name: "new"}, {id: 20, k2: "b", val: -20, name: "new"}})
	defer rec.Release()
	before := len(onlyData(dataFiles(t, dir)))
	if _, err := mergeRows(w, 1, rec); err != nil {
		t.Fatal(err)
	}
	var got []diffRow
	for _, r := range liveRows(t, w, mem) {
		if r.name == "new" {
			got = append(got, r)
		}
	}
	slices.SortFunc(got, func(a, b diffRow) int { return cmp.Compare(a.id, b.id) })
	want := []diffRow{{7, "b", -7, "new"}, {7, "b", -7, "new"}, {20, "b", -20, "new"}}
	if !slices.Equal(got, want) || len(liveRows(t, w, mem)) != 12 {
		t.Fatalf("merged rows %v of %d live, want %v of 12", got, len(liveRows(t, w, mem)), want)
	}
	if after := len(onlyData(dataFiles(t, dir))); after != before+1 {
		t.Fatalf("%d data files before the merge, %d after: want one more (the guessed output was left behind?)", before, after)
	}
}

// onlyData keeps the paths of data files (not deletion files).
func onlyData(paths []string) []string {
	return slices.DeleteFunc(paths, func(p string) bool { return filepath.Base(filepath.Dir(p)) != "data" })
}

// id3And30New is a change of the seeded id table: id 3 updated and id 30
// inserted, both named "new".
func id3And30New(mem memory.Allocator) arrow.RecordBatch {
	return diffRecord(mem, []diffRow{{id: 3, k2: "a", name: "new"}, {id: 30, k2: "a", name: "new"}})
}

// wantIDs3And30New checks the seeded id table after id3And30New merged.
func wantIDs3And30New(t *testing.T, w *Writer, mem memory.Allocator) {
	t.Helper()
	want := names(0, 1, 2, 4, 5, 6, 7, 8, 9)("r")
	want[3], want[30] = "new", "new"
	if got := diffState(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
}
