package delta

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltaupsert"
	"github.com/quiver-ingest/quiver/writers/parquetio"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// enableRowTracking turns row tracking on as Spark's ALTER TABLE does: the
// protocol lists rowTracking, the materialized columns are named, and the
// live files are re-added (dataChange false) to be given row ids.
func enableRowTracking(t testing.TB, cfg *Config) {
	t.Helper()
	b, err := storage.Open(context.Background(), cfg.TableURI, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	snap, err := deltalog.Load(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	p := snap.Protocol
	p = deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"},
		WriterFeatures: []string{"appendOnly", "invariants", "deletionVectors", "domainMetadata", "rowTracking"}}
	m := snap.Metadata
	m.Configuration = map[string]string{"delta.enableRowTracking": "true",
		deltalog.MaterializedRowIDProperty:            "_row-id-col-test",
		deltalog.MaterializedRowCommitVersionProperty: "_row-commit-version-col-test"}
	for k, v := range snap.Metadata.Configuration {
		m.Configuration[k] = v
	}
	actions := []deltalog.Action{{Protocol: &p}, {MetaData: &m}}
	for _, a := range snap.Files() {
		c := *a
		c.DataChange = false
		actions = append(actions, deltalog.Action{Add: &c})
	}
	if _, err := deltalog.Commit(context.Background(), b, snap, actions, deltalog.CommitOptions{Operation: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
}

// rowIdentity is a row's id and commit version.
type rowIdentity struct{ id, version int64 }

// rowIdentities reads the live rows of the table and returns each key's
// row id and commit version, as a reader of row tracking derives them.
func rowIdentities(t *testing.T, cfg *Config, mem memory.Allocator) map[int32]rowIdentity {
	t.Helper()
	snap := snapshot(t, cfg)
	rt := deltalayout.RowTrackingOf(snap)
	if rt == nil {
		t.Fatal("the table does not track rows")
	}
	out := map[int32]rowIdentity{}
	ids := map[int64]bool{}
	eachTrackedBatch(t, cfg, mem, true, func(a *deltalog.Add, rec arrow.RecordBatch) {
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		keys := col("id").(*array.Int32)
		rid, ver := col(rt.IDCol).(*array.Int64), col(rt.VersionCol).(*array.Int64)
		for i := range keys.Len() {
			if rid.IsNull(i) || ver.IsNull(i) {
				t.Fatalf("file %s: row %d without row id or commit version", a.Path, i)
			}
			if ids[rid.Value(i)] {
				t.Fatalf("row id %d twice", rid.Value(i))
			}
			ids[rid.Value(i)] = true
			out[keys.Value(i)] = rowIdentity{rid.Value(i), ver.Value(i)}
		}
	})
	hwm, err := snap.RowIDHighWaterMark()
	if err != nil {
		t.Fatal(err)
	}
	for id := range ids {
		if id > hwm {
			t.Fatalf("row id %d above the high-water mark %d", id, hwm)
		}
	}
	return out
}

// createTrackedMapped creates the table of cfg empty, as Databricks
// creates new tables: column mapping in name mode (physical names col-…,
// unlike the logical ones) and row tracking on from the start, deletion
// vectors when dv.
func createTrackedMapped(t *testing.T, cfg *Config, dv bool) {
	t.Helper()
	field := func(name, typ string, id int) string {
		return fmt.Sprintf(`{"name":%q,"type":%q,"nullable":true,"metadata":{%q:%d,%q:"col-%d-%s"}}`,
			name, typ, deltalog.ColumnIDKey, id, deltalog.PhysicalNameKey, id, name)
	}
	p := deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
		ReaderFeatures: []string{"columnMapping", "deletionVectors"},
		WriterFeatures: []string{"columnMapping", "deletionVectors", "domainMetadata", "rowTracking"}}
	m := deltalog.Metadata{ID: "tracked-mapped", Format: deltalog.Format{Provider: "parquet"},
		SchemaString:     `{"type":"struct","fields":[` + field("id", "integer", 1) + "," + field("str", "string", 2) + `]}`,
		PartitionColumns: []string{},
		Configuration: map[string]string{
			deltalog.ColumnMappingModeKey: "name", deltalog.ColumnMappingMaxIDKey: "2",
			"delta.enableRowTracking":                     "true",
			deltalog.MaterializedRowIDProperty:            "_row-id-col-test",
			deltalog.MaterializedRowCommitVersionProperty: "_row-commit-version-col-test",
			enableDVProperty:                              strconv.FormatBool(dv)}}
	if _, err := deltalog.Commit(context.Background(), tableBucket(t, cfg), nil,
		[]deltalog.Action{{Protocol: &p}, {MetaData: &m}}, deltalog.CommitOptions{Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
}

// TestRowIDsStable: in a table that tracks rows, upserts (copy-on-write and
// with deletion vectors) keep the row ids of the rows they copy and
// update, give updated rows the commit's version and inserted rows fresh
// ids; optimize keeps ids and versions. With column mapping (a table as
// Databricks creates it) the same holds and every file Quiver writes holds
// physical names, the materialized columns under the names the table
// gives them.
func TestRowIDsStable(t *testing.T) {
	for _, mapped := range []bool{false, true} {
		for _, dv := range []bool{false, true} {
			name := map[bool]string{false: "copy-on-write", true: "deletion-vectors"}[dv]
			if mapped {
				name = "column-mapped/" + name
			}
			t.Run(name, func(t *testing.T) { testRowIDsStable(t, mapped, dv) })
		}
	}
}

func testRowIDsStable(t *testing.T, mapped, dv bool) {
	mem := checkedMem(t)
	cfg := upsertDVConfig(fileURI(t))
	cfg.DeletionVectors = dv
	if mapped {
		// The seed commit (version 1) assigns the ids.
		createTrackedMapped(t, cfg, dv)
	}
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, 100})
	if !mapped {
		enableRowTracking(t, cfg)
	}
	before := rowIdentities(t, cfg, mem)
	for id, r := range before {
		if r.id != int64(id) || r.version != 1 {
			t.Fatalf("key %d: %+v after backfill, want id %d, version 1", id, r, id)
		}
	}
	epoch := int64(0)
	upsert := func(changes ...idChange) int64 {
		epoch++
		rec := idBatch(mem, changes...)
		defer rec.Release()
		return commitOne(t, w, writers.TxnKey{Writer: "rt", Epoch: epoch}, rec).Version
	}
	check := func(step string, prev map[int32]rowIdentity, updated map[int32]int64, deleted []int32, inserted []int32) map[int32]rowIdentity {
		t.Helper()
		now := rowIdentities(t, cfg, mem)
		for _, k := range deleted {
			if _, ok := now[k]; ok {
				t.Fatalf("%s: deleted key %d still live", step, k)
			}
			delete(prev, k)
		}
		for k, p := range prev {
			want := p
			if v, ok := updated[k]; ok {
				want.version = v
			}
			if now[k] != want {
				t.Errorf("%s: key %d has %+v, want %+v", step, k, now[k], want)
			}
		}
		for _, k := range inserted {
			if now[k].id < 100 {
				t.Errorf("%s: inserted key %d has row id %d, not fresh", step, k, now[k].id)
			}
		}
		return now
	}
	v := upsert(idChange{10, "ten", "U"}, idChange{20, "twenty", "U"}, idChange{30, "", "D"}, idChange{200, "new", "I"})
	after := check("upsert 1", before, map[int32]int64{10: v, 20: v}, []int32{30}, []int32{200})
	v = upsert(idChange{10, "ten again", "U"}, idChange{40, "forty", "U"}, idChange{201, "new", "I"})
	after = check("upsert 2", after, map[int32]int64{10: v, 40: v}, nil, []int32{201})
	if _, err := w.Optimize(context.Background(), writers.OptimizeRequest{TargetFileBytes: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	if n := snapshot(t, cfg).NumFiles(); n != 1 {
		t.Fatalf("%d files after optimize, want 1", n)
	}
	check("optimize", after, nil, nil, nil)
	if mapped {
		checkPhysicalFiles(t, cfg)
	}
}

// TestDomainsKept: in Spark's liquid-clustered, row-tracked table every
// kind of Quiver commit (upsert, append, optimize, overwrite) keeps the
// delta.clustering domain as it was and advances the row-id high-water
// mark; row ids stay unique and rows untouched keep theirs.
func TestDomainsKept(t *testing.T) {
	mem := checkedMem(t)
	uri := goldenCopy(t, "domain-metadata")
	cfg := testConfig(uri, func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"id"} })
	clustering, ok := snapshot(t, cfg).Domain("delta.clustering")
	if !ok {
		t.Fatal("the golden table has no delta.clustering domain")
	}
	ids := rowIdentities(t, cfg, mem)
	hwm := int64(-1)
	check := func(step string) {
		t.Helper()
		s := snapshot(t, cfg)
		if d, ok := s.Domain("delta.clustering"); !ok || d != clustering {
			t.Fatalf("%s: delta.clustering %+v, want %+v", step, d, clustering)
		}
		h, err := s.RowIDHighWaterMark()
		if err != nil || h <= hwm {
			t.Fatalf("%s: high-water mark %d (%v), was %d", step, h, err, hwm)
		}
		hwm = h
	}
	w := openWriter(t, cfg, mem)
	rec := idBatch(mem, idChange{1, "one", "U"}, idChange{100, "new", "I"})
	commitOne(t, w, writers.TxnKey{Writer: "d", Epoch: 1}, rec)
	rec.Release()
	check("upsert")
	now := rowIdentities(t, cfg, mem)
	for k, r := range ids {
		if k != 1 && now[k] != r {
			t.Fatalf("upsert: key %d moved from %+v to %+v", k, r, now[k])
		}
	}
	if now[1].id != ids[1].id {
		t.Fatalf("upsert: updated key 1 has row id %d, had %d", now[1].id, ids[1].id)
	}

	app := openWriter(t, testConfig(uri), mem)
	rec = idBatch(mem, idChange{200, "appended", ""})
	commitOne(t, app, writers.AutoKey("a"), dropOp(t, mem, rec))
	rec.Release()
	check("append")

	before := rowIdentities(t, cfg, mem)
	if _, err := w.Optimize(context.Background(), writers.OptimizeRequest{TargetFileBytes: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	check("optimize")
	if after := rowIdentities(t, cfg, mem); len(after) != len(before) {
		t.Fatalf("optimize: %d rows, had %d", len(after), len(before))
	} else {
		for k, r := range before {
			if after[k] != r {
				t.Fatalf("optimize: key %d moved from %+v to %+v", k, r, after[k])
			}
		}
	}

	over := openWriter(t, testConfig(uri, func(c *Config) { c.WriteMode = ModeOverwrite }), mem)
	rec = idBatch(mem, idChange{7, "only", ""})
	commitOne(t, over, writers.AutoKey("o"), dropOp(t, mem, rec))
	rec.Release()
	check("overwrite")
	rowIdentities(t, cfg, mem)
}

// dropOp returns rec without its _op column (for append and overwrite).
func dropOp(t *testing.T, mem memory.Allocator, rec arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	s := rec.Schema()
	out := array.NewRecordBatch(arrow.NewSchema(s.Fields()[:2], nil), rec.Columns()[:2], rec.NumRows())
	t.Cleanup(out.Release)
	return out
}

// storedRowIDs reads the live rows of every file of the table as stored
// (nothing materialized by rowTracking) and returns each key's row id: its
// materialized row id where not null, else its file's baseRowId + its
// position in the file, counted over the whole file.
func storedRowIDs(t *testing.T, cfg *Config, mem memory.Allocator) map[int32]int64 {
	t.Helper()
	ctx := context.Background()
	snap := snapshot(t, cfg)
	rt := deltalayout.RowTrackingOf(snap)
	b := tableBucket(t, cfg)
	out := map[int32]int64{}
	for _, a := range snap.Files() {
		_, r, size, gone := openLiveFile(t, b, a)
		deleted := map[int64]bool{}
		for _, p := range gone {
			deleted[p] = true
		}
		rr, err := parquetio.ReadFile(ctx, r, size, mem, parquetio.ReadOptions{BatchRows: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		var pos int64
		for rr.Next() {
			rec := rr.RecordBatch()
			keys := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int32)
			var ids *array.Int64
			if i := rec.Schema().FieldIndices(rt.IDCol); len(i) == 1 {
				ids = rec.Column(i[0]).(*array.Int64)
			}
			for i := range keys.Len() {
				switch {
				case deleted[pos]:
				case ids != nil && ids.IsValid(i):
					out[keys.Value(i)] = ids.Value(i)
				case a.BaseRowID != nil:
					out[keys.Value(i)] = *a.BaseRowID + pos
				default:
					t.Fatalf("file %s: row %d has no row id", a.Path, pos)
				}
				pos++
			}
		}
		if err := rr.Err(); err != nil {
			t.Fatal(err)
		}
		rr.Release()
		r.Close()
	}
	return out
}

// TestRowIDsAcrossBatches: upserts into a file read in two batches (more
// rows than a read batch holds) keep every row's id, checked against the ids the stored
// files give (baseRowId + position, or the materialized column), not
// against what the upsert's own reading derives: a batch's position in
// its file must count in the ids of the rows it copies and updates.
func TestRowIDsAcrossBatches(t *testing.T) {
	for _, dv := range []bool{false, true} {
		t.Run(map[bool]string{false: "copy-on-write", true: "deletion-vectors"}[dv], func(t *testing.T) {
			mem := checkedMem(t)
			cfg := upsertDVConfig(fileURI(t))
			cfg.DeletionVectors = dv
			const n = 70_000 // parquetio reads 65536 rows per batch
			w := openWriter(t, cfg, mem)
			seedIDs(t, w, mem, [2]int32{0, n})
			enableRowTracking(t, cfg)
			batches := 0
			eachLiveBatch(t, cfg, mem, func(*deltalog.Add, arrow.RecordBatch) { batches++ })
			if batches < 2 {
				t.Fatalf("the seeded file is read in %d batches, want several", batches)
			}
			before := storedRowIDs(t, cfg, mem)
			for k := range int32(n) {
				if before[k] != int64(k) {
					t.Fatalf("key %d has row id %d after backfill, want %d", k, before[k], k)
				}
			}
			epoch := int64(0)
			for _, changes := range [][]idChange{
				{{5, "a", "U"}, {65535, "b", "U"}, {65536, "c", "U"}, {69999, "d", "U"}, {50, "", "D"}, {n + 300, "new", "I"}},
				{{3, "e", "U"}, {66000, "f", "U"}, {69998, "g", "U"}},
			} {
				epoch++
				rec := idBatch(mem, changes...)
				commitOne(t, w, writers.TxnKey{Writer: "rt", Epoch: epoch}, rec)
				rec.Release()
				now := storedRowIDs(t, cfg, mem)
				for k, id := range before {
					if k != 50 && k != n+300 && now[k] != id {
						t.Errorf("upsert %d: key %d has row id %d, want %d", epoch, k, now[k], id)
					}
				}
				if _, ok := now[50]; ok {
					t.Errorf("upsert %d: deleted key 50 is live", epoch)
				}
				if now[n+300] < n {
					t.Errorf("upsert %d: inserted key has row id %d, not a fresh one", epoch, now[n+300])
				}
				before = now
			}
		})
	}
}

// TestRowIDsCarriedFromMatch: the row ids an upsert carries from its key
// match (deltaupsert/upsertmatch.go) are the stored ones, in files whose rows hold
// materialized ids other than baseRowId + position, as Spark's OPTIMIZE
// and UPDATE write them (here Quiver's optimize): found by reading the
// key columns (a writer with a cold key cache) and from the key cache
// (the writer whose commit indexed the files). A carried baseRowId +
// position, or an id from the wrong row, changes an updated key's id.
func TestRowIDsCarriedFromMatch(t *testing.T) {
	for _, dv := range []bool{false, true} {
		t.Run(map[bool]string{false: "copy-on-write", true: "deletion-vectors"}[dv], func(t *testing.T) {
			cfg, mem, w := seededTracked(t, dv, 100)
			epoch := int64(0)
			upsert := func(w *Writer, changes ...idChange) {
				t.Helper()
				epoch++
				rec := idBatch(mem, changes...)
				defer rec.Release()
				commitOne(t, w, writers.TxnKey{Writer: "rt", Epoch: epoch}, rec)
			}
			upsert(w, idChange{10, "ten", "U"}, idChange{90, "ninety", "U"}, idChange{200, "new", "I"})
			if _, err := w.Optimize(context.Background(), writers.OptimizeRequest{TargetFileBytes: 128 << 20}); err != nil {
				t.Fatal(err)
			}
			snap := snapshot(t, cfg)
			if snap.NumFiles() != 1 {
				t.Fatalf("%d files after optimize, want 1", snap.NumFiles())
			}
			if n := materializedElsewhere(t, cfg, mem, snap.Files()[0]); n != 101 {
				t.Fatalf("optimized file: %d rows of 101 hold a materialized id other than baseRowId + position, want all", n)
			}
			ids := rowIdentities(t, cfg, mem)
			check := func(step string, updated ...int32) {
				t.Helper()
				now, version := rowIdentities(t, cfg, mem), snapshot(t, cfg).Version
				for _, k := range updated {
					if now[k].id != ids[k].id {
						t.Errorf("%s: updated key %d has row id %d, want %d", step, k, now[k].id, ids[k].id)
					}
					if now[k].version != version {
						t.Errorf("%s: updated key %d has commit version %d, want the commit's %d", step, k, now[k].version, version)
					}
				}
				for k, r := range ids {
					if !slices.Contains(updated, k) && now[k] != r {
						t.Errorf("%s: untouched key %d has %+v, want %+v", step, k, now[k], r)
					}
				}
				ids = now
			}

			cold := openWriter(t, cfg, mem) // nothing cached: the match reads the file
			upsert(cold, idChange{10, "ten again", "U"}, idChange{55, "fifty-five", "U"}, idChange{99, "ninety-nine", "U"})
			check("cold upsert", 10, 55, 99)

			// cold's commit indexed the files it added and read, with their
			// materialized ids: its next upsert matches from the cache.
			if err := cold.waitWarm(context.Background()); err != nil {
				t.Fatal(err)
			}
			snap = snapshot(t, cfg)
			rt, layout := deltalayout.RowTrackingOf(snap), deltalayout.ColumnMapOf(snap).KeyLayout(deltaupsert.NewKeyColumns(cold.cfg.MergeKeys, cold.cfg.PartitionBy).Data)
			withIDs := 0
			for _, a := range snap.Files() {
				fk := cold.keys.Get(a.Path, layout)
				if fk == nil || fk.IDCol != rt.IDCol {
					t.Fatalf("file %s: not cached with its row ids (%+v)", a.Path, fk)
				}
				if fk.IDs != nil {
					withIDs++
				}
			}
			if withIDs == 0 {
				t.Fatal("no cached file holds materialized row ids")
			}
			upsert(cold, idChange{10, "ten thrice", "U"}, idChange{90, "ninety again", "U"}, idChange{56, "fifty-six", "U"}, idChange{201, "new", "I"})
			check("cached upsert", 10, 90, 56)
			if now := rowIdentities(t, cfg, mem); now[201].id <= 200 {
				t.Errorf("inserted key 201 has row id %d, not a fresh one", now[201].id)
			}
		})
	}
}

// materializedElsewhere returns how many rows of data file a hold a
// materialized row id other than a's baseRowId + their position.
func materializedElsewhere(t *testing.T, cfg *Config, mem memory.Allocator, a *deltalog.Add) int {
	t.Helper()
	rt := deltalayout.RowTrackingOf(snapshot(t, cfg))
	_, r, size, _ := openLiveFile(t, tableBucket(t, cfg), a)
	defer r.Close()
	rr, err := parquetio.ReadFile(context.Background(), r, size, mem, parquetio.ReadOptions{Columns: []string{rt.IDCol}})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	n, pos := 0, *a.BaseRowID
	for rr.Next() {
		ids := rr.RecordBatch().Column(0).(*array.Int64)
		for i := range ids.Len() {
			if ids.IsValid(i) && ids.Value(i) != pos {
				n++
			}
			pos++
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// seededTracked creates a row-tracked, column-mapped table (with deletion
// vectors when dv) holding keys 0..n, and returns its writer.
func seededTracked(t *testing.T, dv bool, n int32) (*Config, memory.Allocator, *Writer) {
	t.Helper()
	mem := checkedMem(t)
	cfg := upsertDVConfig(fileURI(t))
	cfg.DeletionVectors = dv
	createTrackedMapped(t, cfg, dv)
	w := openWriter(t, cfg, mem)
	seedIDs(t, w, mem, [2]int32{0, n})
	return cfg, mem, w
}

// TestRowIDColumnOfAnotherType: a foreign data file whose materialized
// row id column is not long fails an upsert only when one of its rows
// matches (its ids are needed); as a mere candidate it is left alone.
func TestRowIDColumnOfAnotherType(t *testing.T) {
	cfg, mem, _ := seededTracked(t, false, 10)

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "col-1-id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "col-2-str", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "_row-id-col-test", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Int32Builder).Append(1000)
	b.Field(1).(*array.StringBuilder).Append("foreign")
	b.Field(2).(*array.StringBuilder).Append("not a long")
	rec := b.NewRecordBatch()
	defer rec.Release()
	name := "foreign.parquet"
	f, err := os.Create(filepath.Join(strings.TrimPrefix(cfg.TableURI, "file://"), name))
	if err != nil {
		t.Fatal(err)
	}
	pw, err := parquetio.NewWriter(f, schema, parquetio.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil || f.Close() != nil {
		t.Fatal(err)
	}
	base, version := int64(1<<20), int64(1)
	add := deltalog.Add{Path: name, Size: st.Size(), DataChange: true, ModificationTime: 1, PartitionValues: map[string]*string{},
		BaseRowID: &base, DefaultRowCommitVersion: &version}
	if _, err := deltalog.Commit(context.Background(), tableBucket(t, cfg), snapshot(t, cfg),
		[]deltalog.Action{{Add: &add}}, deltalog.CommitOptions{Operation: "WRITE"}); err != nil {
		t.Fatal(err)
	}

	w := openWriter(t, cfg, mem) // nothing cached
	up := idBatch(mem, idChange{5, "five", "U"})
	defer up.Release()
	commitOne(t, w, writers.TxnKey{Writer: "rt", Epoch: 1}, up) // the foreign file is a candidate without a match

	bad := idBatch(mem, idChange{1000, "thousand", "U"})
	defer bad.Release()
	ctx, key := context.Background(), writers.TxnKey{Writer: "rt", Epoch: 2}
	if err := w.Write(ctx, key, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Precommit(ctx, key); err == nil || !strings.Contains(err.Error(), "not long") {
		t.Fatalf("upsert matching the foreign file's row: %v, want its id column refused", err)
	}
}
