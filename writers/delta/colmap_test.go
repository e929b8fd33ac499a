package delta

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// mappedSchema is the Arrow schema of the column-mapping golden tables
// after renameAndDrop, plus the column "extra" the appends add.
func mappedSchema(withExtra bool) *arrow.Schema {
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "label", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), Nullable: true},
	}
	if withExtra {
		fields = append(fields, arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}

// mappedRow is one row of mappedSchema (extra < 0: none).
type mappedRow struct {
	id    int32
	label string
	a     int32
	extra int64
}

func mappedBatch(mem memory.Allocator, withExtra bool, rows ...mappedRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, mappedSchema(withExtra))
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int32Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.label)
		st := b.Field(2).(*array.StructBuilder)
		st.Append(true)
		st.FieldBuilder(0).(*array.Int32Builder).Append(r.a)
		m := b.Field(3).(*array.MapBuilder)
		m.Append(true)
		m.KeyBuilder().(*array.StringBuilder).Append("k")
		m.ItemBuilder().(*array.Int32Builder).Append(r.a)
		if withExtra {
			b.Field(4).(*array.Int64Builder).Append(r.extra)
		}
	}
	return b.NewRecordBatch()
}

// renameAndDrop does to a column-mapping golden table what Spark's
// ALTER TABLE … RENAME COLUMN `Name With Space` TO label and DROP COLUMN
// arr do: one metaData action, no data file touched; with dv it also
// enables deletion vectors.
func renameAndDrop(t *testing.T, cfg *Config, dv bool) {
	t.Helper()
	ctx := context.Background()
	snap := snapshot(t, cfg)
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var kept []deltalog.StructField
	for _, f := range schema.Fields {
		switch f.Name {
		case "Name With Space":
			f.Name = "label"
		case "arr":
			continue
		}
		kept = append(kept, f)
	}
	schema.Fields = kept
	m := snap.Metadata
	m.SchemaString = schema.String()
	m.Configuration = maps.Clone(m.Configuration)
	actions := []deltalog.Action{{MetaData: &m}}
	if dv {
		m.Configuration[enableDVProperty] = "true"
		p := deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
			ReaderFeatures: []string{"columnMapping", "deletionVectors"},
			WriterFeatures: []string{"columnMapping", "invariants", "appendOnly", "deletionVectors"}}
		actions = append(actions, deltalog.Action{Protocol: &p})
	}
	if _, err := deltalog.Commit(ctx, tableBucket(t, cfg), snap, actions, deltalog.CommitOptions{Operation: "RENAME COLUMN"}); err != nil {
		t.Fatal(err)
	}
}

// mappedTable copies Spark's column-mapping golden table of mode (name or
// id), renames and drops columns in it (renameAndDrop, with deletion
// vectors when dv) and opens a writer on it, configured by change.
func mappedTable(t *testing.T, mode string, dv bool, change func(*Config)) (*Config, *Writer, memory.Allocator) {
	t.Helper()
	mem := checkedMem(t)
	uri := goldenCopy(t, "column-mapping-"+mode)
	renameAndDrop(t, testConfig(uri), dv)
	cfg := testConfig(uri, change)
	return cfg, openWriter(t, cfg, mem), mem
}

// TestColumnMapping appends (adding a column) and upserts, with and
// without deletion vectors, into Spark's column-mapped tables after a
// column was renamed and another dropped: rows read back by logical name
// are the expected ones; data files hold physical names with the column
// ids as Parquet field ids (nested too), stats and partitionValues use
// physical names, and the added column gets the next id and a col-<uuid>
// name, advancing maxColumnId.
func TestColumnMapping(t *testing.T) {
	for _, mode := range []string{"name", "id"} {
		for _, dv := range []bool{false, true} {
			t.Run(mode+"/dv="+strconv.FormatBool(dv), func(t *testing.T) {
				testColumnMapping(t, mode, dv)
			})
		}
	}
}

func testColumnMapping(t *testing.T, mode string, dv bool) {
	app, w, mem := mappedTable(t, mode, dv, func(c *Config) { c.SchemaEvolution = EvolveAddColumns })
	uri := app.TableURI
	cols := []string{"id", "label", "st", "m", "extra"}
	rec := mappedBatch(mem, true, mappedRow{3, "c", 3, 30})
	defer rec.Release()
	commitOne(t, w, writers.TxnKey{Writer: "append", Epoch: 1}, rec)

	up := testConfig(uri, func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"id"} })
	u := openWriter(t, up, mem)
	// Updates Spark's row 1 (in Spark's file) and Quiver's row 3 without
	// extra (kept), inserts 4.
	urec := mappedBatch(mem, false, mappedRow{1, "B", 10, 0}, mappedRow{3, "C", 30, 0}, mappedRow{4, "d", 4, 0})
	defer urec.Release()
	commitOne(t, u, writers.TxnKey{Writer: "upsert", Epoch: 1}, urec)

	row := func(id, label string, a int, extra string) string {
		n := strconv.Itoa(a)
		return id + "|" + label + `|{"a":` + n + `}|[{"key":"k","value":` + n + `}]|` + extra
	}
	// Row 2 is Spark's all-null row; its null struct is left out of the
	// comparison: arrow-go's pqarrow (parquetio.ReadFile) reads it as a
	// struct of nulls, with or without column mapping.
	got := tableRows(t, up, cols)
	for i, r := range got {
		if strings.HasPrefix(r, "2|") {
			got[i] = strings.Replace(r, `|{"a":null}|`, "|∅|", 1)
		}
	}
	sameRows(t, "rows", got, []string{
		row("0", "a", 0, "∅"), row("1", "B", 10, "∅"), "2|∅|∅|∅|∅", row("3", "C", 30, "30"), row("4", "d", 4, "∅"),
	})

	snap := snapshot(t, up)
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	extra, ok := schema.Field("extra")
	if id, _ := extra.ColumnID(); !ok || id != 7 || !strings.HasPrefix(extra.PhysicalName(), "col-") {
		t.Fatalf("added column: %+v, want id 7 and a col-<uuid> physical name", extra)
	}
	if got := snap.Metadata.Configuration[deltalog.ColumnMappingMaxIDKey]; got != "7" {
		t.Errorf("maxColumnId %q, want 7", got)
	}
	if dv {
		marked := 0
		for _, a := range snap.Files() {
			if a.DeletionVector != nil {
				marked++
			}
		}
		if marked == 0 {
			t.Error("no file carries a deletion vector")
		}
	}
	checkPhysicalFiles(t, up)
}

// checkPhysicalFiles checks every file Quiver wrote (not Spark's) in the
// table's latest version: its Parquet columns are the physical names with
// the column ids as field ids, at every depth, or row tracking's
// materialized columns, and its stats are keyed by physical names.
func checkPhysicalFiles(t *testing.T, cfg *Config) {
	t.Helper()
	snap := snapshot(t, cfg)
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var hidden []string
	if rt := deltalayout.RowTrackingOf(snap); rt != nil {
		hidden = []string{rt.IDCol, rt.VersionCol}
	}
	logical := map[string]bool{}
	for _, f := range schema.Fields {
		logical[f.Name] = true
	}
	ours := 0
	for _, a := range snap.Files() {
		if !strings.Contains(a.Path, ".zstd.") {
			continue // Spark's snappy files
		}
		ours++
		var st struct {
			MinValues, NullCount map[string]json.RawMessage
		}
		if err := json.Unmarshal([]byte(a.Stats), &st); err != nil {
			t.Fatal(err)
		}
		for k := range st.NullCount {
			if logical[k] || !strings.HasPrefix(k, "col-") {
				t.Errorf("file %s: stats key %q is not a physical name", a.Path, k)
			}
		}
		if len(st.MinValues) == 0 {
			t.Errorf("file %s: no minValues: %s", a.Path, a.Stats)
		}
		fields := slices.DeleteFunc(slices.Clone(parquetFile(t, cfg, a).Root().Fields()),
			func(f parquet.Field) bool { return slices.Contains(hidden, f.Name()) })
		checkFieldIDs(t, a.Path, fields, schema.Fields)
	}
	if ours == 0 {
		t.Fatal("Quiver wrote no file")
	}
}

// checkFieldIDs checks that every Parquet field of a file is the physical
// name of a Delta field, with its id as field id (struct members too, also
// inside array elements and map keys and values).
func checkFieldIDs(t *testing.T, file string, got []parquet.Field, want []deltalog.StructField) {
	t.Helper()
	for _, pf := range got {
		df, ok := deltalayout.FieldBy(want, pf.Name(), true)
		if !ok {
			t.Errorf("file %s: Parquet column %q is no physical name of the table", file, pf.Name())
			continue
		}
		if id, _ := df.ColumnID(); int64(pf.ID()) != id {
			t.Errorf("file %s: column %q (%s): field id %d, want %d", file, pf.Name(), df.Name, pf.ID(), id)
		}
		checkNestedIDs(t, file, pf, df.Type)
	}
}

// checkNestedIDs is checkFieldIDs for the fields inside Parquet field pf
// of Delta type dt.
func checkNestedIDs(t *testing.T, file string, pf parquet.Field, dt deltalog.DataType) {
	t.Helper()
	// The levels of a LIST (list.element) or MAP (key_value.key/value).
	inner := func() []parquet.Field {
		if len(pf.Fields()) != 1 {
			t.Errorf("file %s: column %q: %d repeated groups, want 1", file, pf.Name(), len(pf.Fields()))
			return nil
		}
		return pf.Fields()[0].Fields()
	}
	switch {
	case dt.Name == "struct":
		checkFieldIDs(t, file, pf.Fields(), dt.Fields)
	case dt.Element != nil:
		if l := inner(); len(l) == 1 {
			checkNestedIDs(t, file, l[0], *dt.Element)
		}
	case dt.Key != nil && dt.Value != nil:
		if kv := inner(); len(kv) == 2 {
			checkNestedIDs(t, file, kv[0], *dt.Key)
			checkNestedIDs(t, file, kv[1], *dt.Value)
		}
	}
}

// TestColumnMappingStaleDescriptor: a precommitted descriptor whose files
// no longer match the table's column mapping at commit fails and
// publishes nothing, with ErrConflict (gRPC Aborted: a replay plans
// afresh against the new mapping): when another writer took the id of a
// column it adds, or added that column itself, meanwhile, and when a
// column was dropped and added again under its name (another physical
// name), renamed, or two swapped names since its files were written.
func TestColumnMappingStaleDescriptor(t *testing.T) {
	assign := func(s *deltalog.Schema, conf map[string]string) {
		top, err := deltalog.AssignColumnMapping(s, nil, deltalog.MaxColumnID(conf))
		if err != nil {
			t.Fatal(err)
		}
		conf[deltalog.ColumnMappingMaxIDKey] = strconv.FormatInt(top, 10)
	}
	for _, tc := range []struct {
		name    string
		change  func(schema *deltalog.Schema, conf map[string]string)
		wantErr error
		want    string
	}{
		{"id taken", func(s *deltalog.Schema, conf map[string]string) {
			s.Fields = append(s.Fields, deltalog.StructField{Name: "other", Type: deltalog.DataType{Name: "long"}, Nullable: true})
			assign(s, conf)
		}, writers.ErrConflict, "not above"},
		{"added by another writer", func(s *deltalog.Schema, conf map[string]string) {
			s.Fields = append(s.Fields, deltalog.StructField{Name: "extra", Type: deltalog.DataType{Name: "long"}, Nullable: true})
			assign(s, conf)
		}, writers.ErrConflict, "added meanwhile"},
		{"dropped and added again", func(s *deltalog.Schema, conf map[string]string) {
			for i := range s.Fields {
				if s.Fields[i].Name == "label" {
					s.Fields[i].Metadata = nil // a new column of that name
				}
			}
			assign(s, conf)
		}, writers.ErrConflict, "dropped or renamed"},
		{"renamed", renameFields(map[string]string{"label": "label2"}), writers.ErrConflict, `column "label" was renamed or dropped`},
		{"two swapped", renameFields(map[string]string{"label": "id", "id": "label"}), writers.ErrConflict, "dropped or renamed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, w, mem := mappedTable(t, "name", false, func(c *Config) { c.SchemaEvolution = EvolveAddColumns })
			rec := mappedBatch(mem, true, mappedRow{3, "c", 3, 30})
			defer rec.Release()
			key := writers.TxnKey{Writer: "stale", Epoch: 1}
			d := precommitOne(t, w, key, rec)

			alterTable(t, cfg, "ALTER TABLE", tc.change)
			before := snapshot(t, cfg).Version
			_, err := w.Commit(context.Background(), key, []writers.Descriptor{d})
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Commit: %v, want %v saying %q", err, tc.wantErr, tc.want)
			}
			if v := snapshot(t, cfg).Version; v != before {
				t.Errorf("version %d after a refused commit, want %d", v, before)
			}
		})
	}
}

// parquetFile opens data file a of cfg's file:// table with parquet-go
// (closed when the test ends).
func parquetFile(t *testing.T, cfg *Config, a *deltalog.Add) *parquet.File {
	t.Helper()
	key, err := deltalog.DecodePath(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(strings.TrimPrefix(cfg.TableURI, "file://"), key))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, info.Size())
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

// TestColumnMappingOverwrite: an overwrite of a column-mapped table after a
// rename and a drop replaces Spark's files with physical-name files.
func TestColumnMappingOverwrite(t *testing.T) {
	cfg, w, mem := mappedTable(t, "id", false, func(c *Config) { c.WriteMode = ModeOverwrite })
	rec := mappedBatch(mem, false, mappedRow{7, "seven", 7, 0})
	defer rec.Release()
	commitOne(t, w, writers.TxnKey{Writer: "overwrite", Epoch: 1}, rec)
	sameRows(t, "rows", tableRows(t, cfg, []string{"id", "label", "st", "m"}),
		[]string{`7|seven|{"a":7}|[{"key":"k","value":7}]`})
	checkPhysicalFiles(t, cfg)
}

// TestColumnMappingSharedNewColumn: two keys of one Writer adding the same
// column give it one physical name and id, so both commit, in either
// order.
func TestColumnMappingSharedNewColumn(t *testing.T) {
	cfg, w, mem := mappedTable(t, "name", false, func(c *Config) { c.SchemaEvolution = EvolveAddColumns })
	r1, r2 := mappedBatch(mem, true, mappedRow{3, "c", 3, 30}), mappedBatch(mem, true, mappedRow{4, "d", 4, 40})
	defer r1.Release()
	defer r2.Release()
	k1, k2 := writers.TxnKey{Writer: "one", Epoch: 1}, writers.TxnKey{Writer: "two", Epoch: 1}
	d1, d2 := precommitOne(t, w, k1, r1), precommitOne(t, w, k2, r2)
	for _, c := range []struct {
		k writers.TxnKey
		d writers.Descriptor
	}{{k2, d2}, {k1, d1}} {
		if _, err := w.Commit(context.Background(), c.k, []writers.Descriptor{c.d}); err != nil {
			t.Fatalf("Commit %s: %v", c.k, err)
		}
	}
	rows := tableRows(t, cfg, []string{"id", "extra"})
	if !slices.Contains(rows, "3|30") || !slices.Contains(rows, "4|40") {
		t.Errorf("rows %v lack 3|30 and 4|40", rows)
	}
}

// TestCheckMappedColumnsNested: a field inside an array's elements or a
// map's keys or values whose physical name changed since the files were
// written (dropped and added again) is refused like a top-level one.
func TestCheckMappedColumnsNested(t *testing.T) {
	field := func(name, phys string, id int, typ string) string {
		return `{"name":"` + name + `","type":` + typ + `,"nullable":true,"metadata":{"delta.columnMapping.id":` +
			strconv.Itoa(id) + `,"delta.columnMapping.physicalName":"` + phys + `"}}`
	}
	schema := func(x string) *deltalog.Schema {
		st := `{"type":"struct","fields":[` + field("x", x, 2, `"integer"`) + `]}`
		s, err := deltalog.ParseSchema(`{"type":"struct","fields":[` +
			field("arr", "col-arr", 1, `{"type":"array","elementType":`+st+`,"containsNull":true}`) + `,` +
			field("mk", "col-mk", 3, `{"type":"map","keyType":`+st+`,"valueType":"integer","valueContainsNull":true}`) + `,` +
			field("mv", "col-mv", 4, `{"type":"map","keyType":"string","valueType":`+st+`,"valueContainsNull":true}`) + `]}`)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := deltalayout.CheckMappedColumns(schema("col-x"), 4, schema("col-x"), nil); err != nil {
		t.Fatalf("same mapping: %v", err)
	}
	for i, path := range []string{"arr.element.x", "mk.key.x", "mv.value.x"} {
		files := schema("col-x")
		table := schema("col-x")
		table.Fields[i] = schema("col-x-new").Fields[i]
		err := deltalayout.CheckMappedColumns(table, 4, files, nil)
		if !errors.Is(err, writers.ErrConflict) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s renamed physically: %v, want ErrConflict naming it", path, err)
		}
	}
}

// TestColumnMappingPartitioned: appends into a partitioned column-mapped
// table key add.partitionValues by the partition column's physical name,
// and the files hold the other columns under their physical names.
func TestColumnMappingPartitioned(t *testing.T) {
	mem := checkedMem(t)
	cfg := mappedPartitioned(t, mem)

	rec := kvBatch(mem, true, kv{2, "b", 1}, kv{3, "c", 2}, kv{4, "b", 3})
	defer rec.Release()
	commitOne(t, openWriter(t, cfg, mem), writers.TxnKey{Writer: "w", Epoch: 1}, rec)

	snap := snapshot(t, cfg)
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	k, _ := schema.Field("k")
	got := map[string]bool{}
	for _, a := range snap.Files() {
		if len(a.PartitionValues) != 1 || a.PartitionValues[k.PhysicalName()] == nil {
			t.Fatalf("file %s: partitionValues %v, want keyed by %q", a.Path, a.PartitionValues, k.PhysicalName())
		}
		got[*a.PartitionValues[k.PhysicalName()]] = true
	}
	if len(got) != 2 || !got["b"] || !got["c"] {
		t.Errorf("partitions %v, want b and c", got)
	}
	sameRows(t, "rows", tableRows(t, cfg, []string{"id", "v"}), []string{"2|1", "3|2", "4|3"})
	checkPhysicalFiles(t, cfg)
}

// TestNestedRenameStaleDescriptor: a struct field renamed (st.a →
// st.a_renamed) between a descriptor's precommit and its commit makes the
// commit a conflict (Aborted, replayable) naming the field, as at the top
// level, with schema evolution on and off; nothing is published.
func TestNestedRenameStaleDescriptor(t *testing.T) {
	for _, evolve := range []bool{false, true} {
		t.Run("evolve="+strconv.FormatBool(evolve), func(t *testing.T) {
			cfg, w, mem := mappedTable(t, "name", false, func(c *Config) {
				if evolve {
					c.SchemaEvolution = EvolveAddColumns
				}
			})
			rec := mappedBatch(mem, false, mappedRow{3, "c", 3, 30})
			defer rec.Release()
			key := writers.TxnKey{Writer: "stale", Epoch: 1}
			d := precommitOne(t, w, key, rec)

			alterTable(t, cfg, "RENAME COLUMN", func(s *deltalog.Schema, _ map[string]string) {
				for i := range s.Fields {
					if s.Fields[i].Name == "st" {
						s.Fields[i].Type.Fields[0].Name = "a_renamed"
					}
				}
			})
			before := snapshot(t, cfg).Version
			_, err := w.Commit(context.Background(), key, []writers.Descriptor{d})
			if !errors.Is(err, writers.ErrConflict) || !strings.Contains(err.Error(), `"st.a" was renamed or dropped`) {
				t.Fatalf("Commit: %v, want ErrConflict saying st.a was renamed or dropped", err)
			}
			if v := snapshot(t, cfg).Version; v != before {
				t.Errorf("version %d after a refused commit, want %d", v, before)
			}
		})
	}
}

// mappedPartitioned returns the config of a fresh column-mapped table of
// kvBatch's columns partitioned by k (no rows).
func mappedPartitioned(t *testing.T, mem memory.Allocator) *Config {
	t.Helper()
	cfg := testConfig(fileURI(t), func(c *Config) { c.PartitionBy = []string{"k"} })
	seed := kvBatch(mem, true, kv{1, "a", 0})
	defer seed.Release()
	commitOne(t, openWriter(t, cfg, mem), writers.AutoKey("seed"), seed)
	toColumnMapped(t, cfg)
	return cfg
}
