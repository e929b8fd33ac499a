package lancetable

import (
	"bytes"
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/lanceprobe/probetest"
	"github.com/quiver-ingest/quiver/writers/lance/internal/lancetest"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// putFragment writes recs as one data file and returns its fragment.
func putFragment(t testing.TB, b *storage.Bucket, ls *lancefile.Schema, recs ...arrow.RecordBatch) Fragment {
	t.Helper()
	var buf bytes.Buffer
	w, err := lancefile.NewFileWriter(&buf, recs[0].Schema(), ls, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	size, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	name := NewDataFileName()
	if err := b.Put(context.Background(), DataKey(name), buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	df := DataFile{Path: name, Major: 2, Minor: 0, SizeBytes: size}
	for i, f := range ls.Fields {
		df.Fields = append(df.Fields, f.ID)
		df.ColumnIndices = append(df.ColumnIndices, int32(i))
	}
	return Fragment{Files: []DataFile{df}, PhysicalRows: w.Rows()}
}

func openDir(t testing.TB, dir string) *storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// scanAll reads every live row of d.
func scanAll(t *testing.T, b *storage.Bucket, d *Dataset, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	var recs []arrow.RecordBatch
	for i := range d.Manifest.Fragments {
		r, err := d.ReadFragment(context.Background(), b, &d.Manifest.Fragments[i], mem)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r...)
	}
	out := lancetest.ConcatRecords(t, mem, recs)
	for _, r := range recs {
		r.Release()
	}
	return out
}

func TestDatasetCreateAppendLanceDB(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db := t.TempDir()
	b := openDir(t, filepath.Join(db, "all.lance"))
	s := lancetest.AllTypesSchema()
	ls, err := lancefile.FromArrow(s)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	r1 := lancetest.RandomRecord(mem, s, rng, 0, 40, 20)
	r2 := lancetest.RandomRecord(mem, s, rng, 40, 25, 20)
	defer r1.Release()
	defer r2.Release()

	d1, err := Commit(ctx, b, nil, &Transaction{Op: OpOverwrite, Schema: ls, Fragments: []Fragment{putFragment(t, b, ls, r1)}})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Commit(ctx, b, d1, &Transaction{Op: OpAppend, Properties: map[string]string{"quiver.writer": "w", "quiver.epoch": "3"},
		Fragments: []Fragment{putFragment(t, b, ls, r2)}})
	if err != nil {
		t.Fatal(err)
	}
	if d2.Version() != 2 || d2.Manifest.NumRows() != 65 {
		t.Fatalf("version %d rows %d, want 2 and 65", d2.Version(), d2.Manifest.NumRows())
	}
	latest, err := Latest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	txn, err := latest.Transaction(ctx, b)
	if err != nil || txn.Properties["quiver.epoch"] != "3" || txn.Op != OpAppend {
		t.Fatalf("transaction %+v, %v", txn, err)
	}
	got := scanAll(t, b, latest, mem)
	defer got.Release()
	want := lancetest.ConcatRecords(t, mem, []arrow.RecordBatch{r1, r2})
	defer want.Release()
	if !array.RecordEqual(want, got) {
		t.Fatalf("read back differs")
	}

	out := probetest.Run(t, "verify", db, "all", "--limit", "100")
	for _, w := range []string{"== latest: version=2 rows=65", "v1 rows=40", "v2 rows=65", `"id":"64"`} {
		if !strings.Contains(out, w) {
			t.Fatalf("probe output lacks %q:\n%s", w, out)
		}
	}
	// Every large_string value Quiver wrote is what LanceDB prints.
	large := want.Column(13).(*array.LargeString)
	for i := range large.Len() {
		if large.IsValid(i) && !strings.Contains(out, `"ls":"`+large.Value(i)+`"`) {
			t.Fatalf("probe output lacks ls=%q", large.Value(i))
		}
	}
}
