package e2e

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// upsertEndpoint is the name of the Delta upsert endpoint of
// deltaUpsert; deltaEndpoint appends to the same table.
const upsertEndpoint = "changes"

// deltaUpsert is the config of the Delta endpoint upsertEndpoint (mode
// upsert, merge_keys [id]) on the table folder tableDir, for writeConfig.
func deltaUpsert(tableDir string) string {
	return fmt.Sprintf(`{name: %s, sink: delta, delta: {table_uri: "file://%s", mode: upsert, merge_keys: [id], parquet: {compression: snappy}}}`, upsertEndpoint, tableDir)
}

// change is one changelog row: key id, value v, and _op ("" = null,
// an upsert).
type change struct {
	id int64
	v  string
	op string
}

// changelogSchema is the changelog's schema: the table's columns id and
// v, and the metadata column _op, which never reaches the table.
var changelogSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.BinaryTypes.String},
	{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// changelog returns a reader of one batch of changes. Without a single
// _op it carries only the table's columns (id, v), like a plain append.
func changelog(t *testing.T, changes []change) array.RecordReader {
	t.Helper()
	withOp := slices.ContainsFunc(changes, func(c change) bool { return c.op != "" })
	schema := changelogSchema
	if !withOp {
		schema = arrow.NewSchema(changelogSchema.Fields()[:2], nil)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, c := range changes {
		b.Field(0).(*array.Int64Builder).Append(c.id)
		b.Field(1).(*array.StringBuilder).Append(c.v)
		if withOp {
			ops := b.Field(2).(*array.StringBuilder)
			if c.op == "" {
				ops.AppendNull()
			} else {
				ops.Append(c.op)
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	r, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Release)
	return r
}

// seedChanges returns upserts of ids [start, start+n) with v "seed-<id>".
func seedChanges(start, n int64) []change {
	out := make([]change, 0, n)
	for id := start; id < start+n; id++ {
		out = append(out, change{id: id, v: fmt.Sprintf("seed-%d", id)})
	}
	return out
}

// applyChanges returns model with changes applied in order: the last
// change of a key wins, D deletes it.
func applyChanges(model map[int64]string, changes []change) map[int64]string {
	out := maps.Clone(model)
	if out == nil {
		out = make(map[int64]string)
	}
	for _, c := range changes {
		if c.op == "D" {
			delete(out, c.id)
		} else {
			out[c.id] = c.v
		}
	}
	return out
}

// upsertRows reads id and v of every active file of the table at
// tab.version, failing on a duplicated id.
func upsertRows(t *testing.T, tab deltaTable) map[int64]string {
	t.Helper()
	rows := make(map[int64]string)
	tab.eachBatch(t, []string{"id", "v"}, func(path string, rec arrow.RecordBatch) {
		ids, vs := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
		for i := range ids.Len() {
			id := ids.Value(i)
			if _, dup := rows[id]; dup {
				t.Fatalf("id %d is in the table twice (file %s)", id, path)
			}
			rows[id] = vs.Value(i)
		}
	})
	return rows
}

// wantRows checks that the table at its latest version holds exactly
// model, each id once, and returns what it read.
func wantRows(t *testing.T, tableDir string, model map[int64]string) deltaTable {
	t.Helper()
	tab := readDelta(t, tableDir)
	got := upsertRows(t, tab)
	if len(got) != len(model) {
		t.Fatalf("table at version %d holds %d rows, want %d", tab.version, len(got), len(model))
	}
	for id, v := range model {
		if g, ok := got[id]; !ok || g != v {
			t.Fatalf("table at version %d: id %d = %q (present %v), want %q", tab.version, id, g, ok, v)
		}
	}
	return tab
}
