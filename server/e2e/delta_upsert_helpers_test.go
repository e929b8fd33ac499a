package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// upsertEndpoint is the name of the Delta upsert endpoint of
// writeUpsertConfig; deltaEndpoint appends to the same table.
const upsertEndpoint = "changes"

// writeUpsertConfig writes a config with two Delta endpoints on the table
// folder tableDir: deltaEndpoint (append) and upsertEndpoint (mode upsert,
// merge_keys [id]), with free ports and dataDir, returning its path.
func writeUpsertConfig(t *testing.T, dataDir, tableDir string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: %s\nendpoints:\n", dataDir)
	fmt.Fprintf(&b, "  - name: %s\n    sink: delta\n    delta: {table_uri: \"file://%s\", parquet: {compression: snappy}}\n", deltaEndpoint, tableDir)
	fmt.Fprintf(&b, "  - name: %s\n    sink: delta\n    delta: {table_uri: \"file://%s\", mode: upsert, merge_keys: [id], parquet: {compression: snappy}}\n", upsertEndpoint, tableDir)
	path := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
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
	ctx := context.Background()
	b := tab.store(t)
	rows := make(map[int64]string)
	for _, a := range tab.snap.Files() {
		key, err := deltalog.DecodePath(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		r, size, err := b.OpenReader(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := parquetio.ReadFile(ctx, r, size, memory.DefaultAllocator, parquetio.ReadOptions{Columns: []string{"id", "v"}})
		if err != nil {
			t.Fatal(err)
		}
		for rr.Next() {
			rec := rr.RecordBatch()
			ids, vs := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
			for i := range ids.Len() {
				id := ids.Value(i)
				if _, dup := rows[id]; dup {
					t.Fatalf("id %d is in the table twice (file %s)", id, a.Path)
				}
				rows[id] = vs.Value(i)
			}
		}
		if err := rr.Err(); err != nil {
			t.Fatal(err)
		}
		rr.Release()
		r.Close()
	}
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
