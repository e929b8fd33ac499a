package lance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/emulator"
	"github.com/quiver-ingest/quiver/internal/lanceprobe/probetest"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
)

// scenarioSchema is the schema of `probe.mjs scenario`.
func scenarioSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64},
		{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil)
}

// scenarioRows builds rows id in [from, to) of scenarioSchema: name null
// every third row, tags ["t<id>", null] or null every fourth.
func scenarioRows(mem memory.Allocator, from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, scenarioSchema())
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%3 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", i))
		}
		b.Field(2).(*array.Float64Builder).Append(float64(i) + 0.5)
		lb := b.Field(3).(*array.ListBuilder)
		if i%4 == 0 {
			lb.AppendNull()
		} else {
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("t%d", i))
			lb.ValueBuilder().AppendNull()
		}
	}
	return b.NewRecordBatch()
}

// commitRows writes rec under key and commits it.
func commitRows(t *testing.T, w *Writer, key writers.TxnKey, rec arrow.RecordBatch) writers.CommitInfo {
	t.Helper()
	ctx := context.Background()
	if err := w.Write(ctx, key, rec); err != nil {
		t.Fatal(err)
	}
	d, err := w.Precommit(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	info, err := w.Commit(ctx, key, []writers.Descriptor{d})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// readIDs returns the id column of every live row Quiver reads.
func readIDs(t *testing.T, w *Writer, mem memory.Allocator) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	eachLiveRecord(t, w, mem, func(rec arrow.RecordBatch) {
		ids := rec.Column(0).(*array.Int64)
		names := rec.Column(1).(*array.String)
		for r := range ids.Len() {
			out[ids.Value(r)] = names.ValueStr(r)
		}
	})
	return out
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Fatalf("probe output lacks %q:\n%s", l, out)
		}
	}
}

// TestLanceDBReadsAndMutatesQuiverDataset: LanceDB reads a dataset the sink
// created (every version, values and nulls), merges into and deletes from
// it, and Quiver then reads LanceDB's versions and appends on top.
func TestLanceDBReadsAndMutatesQuiverDataset(t *testing.T) {
	probetest.Dir(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "items")
	w := newWriter(t, dir, mem)
	defer w.Close(context.Background())

	r1, r2 := scenarioRows(mem, 0, 6), scenarioRows(mem, 6, 10)
	defer r1.Release()
	defer r2.Release()
	commitRows(t, w, writers.AutoKey("s1"), r1)
	commitRows(t, w, writers.TxnKey{Writer: "job", Epoch: 4}, r2)

	out := probetest.Run(t, "verify", db, "items", "--mutate")
	wantLines(t, out,
		"== latest: version=2 rows=10",
		`{"id":"0","name":null,"score":0.5,"tags":null}`,
		`{"id":"5","name":"n5","score":5.5,"tags":["t5",null]}`,
		`{"id":"9","name":null,"score":9.5,"tags":["t9",null]}`,
		"v1 rows=6", "v2 rows=10",
		// LanceDB's mergeInsert updated one row and inserted id 1009, its
		// delete removed 1009 again.
		"== after mutate: version=4 rows=10",
	)

	// Quiver reads LanceDB's Update and Delete versions (deletion files)...
	got := readIDs(t, w, mem)
	if len(got) != 10 || !strings.Contains(out, `"name":"mutated"`) {
		t.Fatalf("Quiver reads %d rows after LanceDB's mutations, want 10: %v", len(got), got)
	}
	// ... still knows its epoch, and appends on top.
	if e, ok, err := w.CommittedEpoch(context.Background(), "job"); err != nil || !ok || e != 4 {
		t.Fatalf("CommittedEpoch after LanceDB's versions = %d, %v, %v; want 4", e, ok, err)
	}
	r3 := scenarioRows(mem, 100, 103)
	defer r3.Release()
	if info := commitRows(t, w, writers.TxnKey{Writer: "job", Epoch: 5}, r3); info.Version != 5 {
		t.Fatalf("append after LanceDB's versions made version %d, want 5", info.Version)
	}
	out = probetest.Run(t, "verify", db, "items")
	wantLines(t, out, "== latest: version=5 rows=13", `{"id":"101","name":"n101","score":101.5,"tags":["t101",null]}`, "v4 rows=10", "v5 rows=13")
}

// TestQuiverAppendsToLanceDBDataset: a 2.0 dataset LanceDB wrote (append,
// mergeInsert, delete: .arrow deletion files) is read by Quiver and
// appended to; LanceDB reads the result.
func TestQuiverAppendsToLanceDBDataset(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "t")
	probetest.Run(t, "scenario", db, "--storage", "2.0")
	w := newWriter(t, dir, mem)
	defer w.Close(context.Background())

	got := readIDs(t, w, mem)
	want := map[int64]string{1: "alice", 2: "bob", 3: "carol", 5: "eve", 6: "frank", 7: "grace", 8: "heidi", 9: "ivan", 10: "(null)"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Quiver reads %v, want %v", got, want)
	}
	s, err := w.Schema(context.Background())
	if err != nil || writers.SchemaMismatch(s, scenarioSchema()) != "" {
		t.Fatalf("Schema = %v, %v", s, err)
	}
	r := scenarioRows(mem, 20, 23)
	defer r.Release()
	if info := commitRows(t, w, writers.TxnKey{Writer: "job", Epoch: 1}, r); info.Version != 5 {
		t.Fatalf("append made version %d, want 5", info.Version)
	}
	out := probetest.Run(t, "verify", db, "t")
	wantLines(t, out, "== latest: version=5 rows=12", `{"id":"20","name":"n20","score":20.5,"tags":null}`,
		`{"id":"2","name":"bob","score":20.5,"tags":["upd"]}`, "v4 rows=9", "v5 rows=12")
	d, err := lancetable.Latest(context.Background(), w.bucket)
	if err != nil || d.Manifest.FormatVersion != "2.0" {
		t.Fatalf("latest: %v, format %q", err, d.Manifest.FormatVersion)
	}
}

// TestLanceDBReadsQuiverDatasetOnS3: LanceDB reads, from the S3 emulator,
// a dataset the sink wrote there (its object_store reaches moto through
// AWS_ENDPOINT and AWS_ALLOW_HTTP).
func TestLanceDBReadsQuiverDatasetOnS3(t *testing.T) {
	probetest.Dir(t)
	store := emulator.S3(t)
	bucket := store.Bucket(t)
	t.Setenv("AWS_ENDPOINT", store.Endpoint)
	t.Setenv("AWS_ALLOW_HTTP", "true")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	w := newWriterURI(t, store.URI(bucket, "items.lance"), mem)
	defer w.Close(context.Background())
	r1, r2 := scenarioRows(mem, 0, 6), scenarioRows(mem, 6, 10)
	defer r1.Release()
	defer r2.Release()
	commitRows(t, w, writers.AutoKey("s1"), r1)
	commitRows(t, w, writers.TxnKey{Writer: "job", Epoch: 1}, r2)

	out := probetest.Run(t, "verify", "s3://"+bucket, "items")
	wantLines(t, out,
		"== latest: version=2 rows=10",
		`{"id":"5","name":"n5","score":5.5,"tags":["t5",null]}`,
		"v1 rows=6", "v2 rows=10",
	)
}

// TestLanceDBReadsQuiverPageKinds: LanceDB npm (lance 8.0, whose default is
// 2.1) reads Quiver's 2.1 pages of every kind this writer chooses: repeated
// strings as dictionary pages (also in a list), strings over 8 KiB as
// full-zip pages (mixed with short ones and nulls), bit-packed integers.
func TestLanceDBReadsQuiverPageKinds(t *testing.T) {
	probetest.Dir(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	db, dir := dbDir(t, "kinds")
	cfg := NewConfig()
	cfg.DatasetURI, cfg.DataStorageVersion = "file://"+dir, "2.1"
	w, err := New(cfg, writers.Env{Endpoint: "kinds", Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "cat", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "doc", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	cats := []string{"books", "games", "music"}
	doc := func(i int) string {
		if i%50 == 7 {
			return strings.Repeat(fmt.Sprintf("%d ", i), 5000)
		}
		return fmt.Sprintf("d%d", i)
	}
	const n = 300
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).AppendValues([]string{cats[i%3]}, []bool{i%11 != 0})
		lb := b.Field(2).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).AppendValues(cats[:i%3], nil)
		b.Field(3).(*array.StringBuilder).AppendValues([]string{doc(i)}, []bool{i%13 != 0})
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	commitRows(t, w, writers.AutoKey("s1"), rec)

	var dump struct {
		Rows []struct {
			ID   string   `json:"id"`
			Cat  *string  `json:"cat"`
			Tags []string `json:"tags"`
			Doc  *string  `json:"doc"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(probetest.Run(t, "dump", db, "kinds", "--on", "id")), &dump); err != nil {
		t.Fatal(err)
	}
	if len(dump.Rows) != n {
		t.Fatalf("LanceDB reads %d rows, want %d", len(dump.Rows), n)
	}
	for i, r := range dump.Rows {
		wantCat, wantDoc := cats[i%3], doc(i)
		if r.ID != fmt.Sprint(i) || (r.Cat == nil) != (i%11 == 0) || r.Cat != nil && *r.Cat != wantCat ||
			fmt.Sprint(r.Tags) != fmt.Sprint(cats[:i%3]) || (r.Doc == nil) != (i%13 == 0) || r.Doc != nil && *r.Doc != wantDoc {
			t.Fatalf("row %d: LanceDB reads id %s cat %v tags %v doc %.20v", i, r.ID, r.Cat, r.Tags, r.Doc)
		}
	}
	// A 2.1 dataset: 300 rows of three categories make dictionary pages,
	// the docs of 10 KB and more full-zip pages (lancefile's
	// TestStringDictionaryPages and TestFullZipRoundTrip check the kinds).
	d, err := lancetable.Latest(context.Background(), w.bucket)
	if err != nil || d.Manifest.FormatVersion != "2.1" {
		t.Fatalf("latest: %v, format %q", err, d.Manifest.FormatVersion)
	}
}
