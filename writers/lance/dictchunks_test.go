package lance

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

var wideDictSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "c", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, Nullable: true},
}, nil)

// wideDictRecord is rows ids [from, from+n) whose column c indexes a
// dictionary of its own of size entries ("k<k>-<i>"), every 11th null.
func wideDictRecord(mem memory.Allocator, k, from, n, size int) arrow.RecordBatch {
	ids := array.NewInt64Builder(mem)
	defer ids.Release()
	idx := array.NewInt8Builder(mem)
	defer idx.Release()
	vals := array.NewStringBuilder(mem)
	defer vals.Release()
	for i := range size {
		vals.Append(fmt.Sprintf("k%d-%d", k, i))
	}
	for i := range n {
		ids.Append(int64(from + i))
		if i%11 == 0 {
			idx.AppendNull()
		} else {
			idx.Append(int8((i*7 + k) % size))
		}
	}
	ia, va, id := idx.NewArray(), vals.NewArray(), ids.NewArray()
	defer ia.Release()
	defer va.Release()
	defer id.Release()
	c := array.NewDictionaryArray(wideDictSchema.Field(1).Type, ia, va)
	defer c.Release()
	return array.NewRecordBatch(wideDictSchema, []arrow.Array{id, c}, int64(n))
}

// dictRows is id -> value of c ("<null>") of every live row of w's dataset,
// checking that no record's dictionary outgrows int8 indices.
func dictRows(t *testing.T, w *Writer, mem memory.Allocator) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	eachLiveRecord(t, w, mem, func(rec arrow.RecordBatch) { addDictRows(t, out, rec) })
	return out
}

// addDictRows adds rec's rows to out, checking that its dictionary keeps
// within what int8 indices address (128 entries, 0 to 127).
func addDictRows(t *testing.T, out map[int64]string, rec arrow.RecordBatch) int {
	t.Helper()
	ids, c := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Dictionary)
	n := c.Dictionary().Len()
	if n > 128 {
		t.Fatalf("a record's dictionary has %d entries", n)
	}
	for r := range ids.Len() {
		v := "<null>"
		if c.IsValid(r) {
			v = c.Dictionary().ValueStr(c.GetValueIndex(r))
		}
		out[ids.Value(r)] = v
	}
	return n
}

// dictWriter opens a writer of the default configuration on a new
// dataset in a temporary directory, with a checked allocator; the test's
// end closes it and checks that every allocation was freed.
func dictWriter(t *testing.T) (*Writer, memory.Allocator) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	cfg := NewConfig()
	cfg.DatasetURI = "file://" + t.TempDir()
	w := openWriter(t, cfg, mem)
	t.Cleanup(func() { w.Close(context.Background()) })
	return w, mem
}

// commitDictRecords commits recs (released) as transaction epoch, their
// rows added to want.
func commitDictRecords(t *testing.T, w *Writer, epoch int64, want map[int64]string, recs []arrow.RecordBatch) {
	t.Helper()
	for _, rec := range recs {
		addDictRows(t, want, rec)
	}
	_, err := commitRecs(w, epoch, recs)
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestDictionarySharedFullInt8: a transaction of 10 batches sharing one
// dictionary of 128 entries (all that int8 indices address) is one data
// file, read back as one record of exactly that dictionary.
func TestDictionarySharedFullInt8(t *testing.T) {
	ctx := context.Background()
	w, mem := dictWriter(t)
	want := map[int64]string{}
	var recs []arrow.RecordBatch
	for k := range 10 {
		recs = append(recs, wideDictRecord(mem, 0, 300*k, 300, 128))
	}
	commitDictRecords(t, w, 1, want, recs)
	d, _ := w.latest(ctx)
	if n := len(d.Manifest.Fragments); n != 1 {
		t.Fatalf("%d fragments, want one data file", n)
	}
	got, records := map[int64]string{}, 0
	eachLiveRecord(t, w, mem, func(rec arrow.RecordBatch) {
		records++
		if n := addDictRows(t, got, rec); n != 128 {
			t.Errorf("a record's dictionary has %d entries, want 128", n)
		}
	})
	if records != 1 || !maps.Equal(got, want) {
		t.Fatalf("%d records, %d rows; want 1 record of %d rows", records, len(got), len(want))
	}
}

// TestDictionaryChunksSink: transactions of categorical batches with
// dictionaries of their own, 100 entries each under int8 indices, whose
// union no file's column could address: every batch lands in a data file
// of its own (pylance joins a file's pages, and fails past the index
// type), every value reads back, and optimize leaves the fragments, which
// cannot shrink, as they are, and does not rewrite them again on its next
// run.
func TestDictionaryChunksSink(t *testing.T) {
	for _, format := range []string{"2.1", "2.2"} {
		t.Run(format, func(t *testing.T) {
			ctx := context.Background()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			cfg := NewConfig()
			cfg.DatasetURI = "file://" + t.TempDir()
			cfg.DataStorageVersion = format
			w := openWriter(t, cfg, mem)
			defer w.Close(ctx)
			want := map[int64]string{}
			for txn := range 3 {
				var recs []arrow.RecordBatch
				for k := range 4 {
					recs = append(recs, wideDictRecord(mem, 4*txn+k, 250*(4*txn+k), 250, 100))
				}
				commitDictRecords(t, w, int64(txn+1), want, recs)
			}
			d, _ := w.latest(ctx)
			if n := len(d.Manifest.Fragments); n != 12 {
				t.Fatalf("%d fragments, want a data file per batch (12)", n)
			}
			if got := dictRows(t, w, mem); !maps.Equal(got, want) {
				t.Fatalf("rows differ: %d rows, want %d", len(got), len(want))
			}
			res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes})
			if err != nil || res != (writers.OptimizeResult{Version: int64(d.Version())}) {
				t.Fatalf("optimize = %+v, %v; want nothing done", res, err)
			}
			// The next (scheduled) optimize knows the group does not
			// shrink and reads none of it: with a data file of it gone it
			// still does nothing, without an error.
			if err := os.Remove(filepath.Join(strings.TrimPrefix(cfg.DatasetURI, "file://"), "data", d.Manifest.Fragments[5].Files[0].Path)); err != nil {
				t.Fatal(err)
			}
			res, err = w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes})
			if err != nil || res != (writers.OptimizeResult{Version: int64(d.Version())}) {
				t.Fatalf("second optimize = %+v, %v; want nothing done, nothing read", res, err)
			}
		})
	}
}

// TestOptimizeWideDictionary: small fragments whose dictionaries (40
// entries each) outgrow int8 indices together compact into fewer
// fragments, each file holding only as many as its index type addresses,
// with every value kept.
func TestOptimizeWideDictionary(t *testing.T) {
	ctx := context.Background()
	w, mem := dictWriter(t)
	want := map[int64]string{}
	for k := range 12 {
		rec := wideDictRecord(mem, k, 100*k, 100, 40)
		addDictRows(t, want, rec)
		_, err := commitRecs(w, int64(k+1), []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: writers.DefaultOptimizeTargetBytes})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved != 12 || res.FilesAdded != 4 || res.Rows != 1200 {
		t.Fatalf("optimize = %+v, want 12 files compacted into 4 (3 dictionaries of 40 each)", res)
	}
	if got := dictRows(t, w, mem); !maps.Equal(got, want) {
		t.Fatalf("rows differ after optimize: %d rows, want %d", len(got), len(want))
	}
}
