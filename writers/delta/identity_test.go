package delta

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// identityTable creates a table (id long, k string, v long) with one row
// (id 1, "a", 0), then makes id an identity column starting at 1, step
// step, high-water mark 1, as Spark's GENERATED … AS IDENTITY tables are.
func identityTable(t *testing.T, uri string, always bool, step int64) {
	t.Helper()
	mem := checkedMem(t)
	cfg := testConfig(uri)
	w := openWriter(t, cfg, mem)
	rec := kvBatch(mem, true, kv{1, "a", 0})
	defer rec.Release()
	commitOne(t, w, writers.AutoKey("seed"), rec)

	snap := snapshot(t, cfg)
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	schema.Fields[0].Metadata = map[string]json.RawMessage{
		"delta.identity.start":               json.RawMessage("1"),
		"delta.identity.step":                json.RawMessage(strconv.FormatInt(step, 10)),
		"delta.identity.highWaterMark":       json.RawMessage("1"),
		"delta.identity.allowExplicitInsert": json.RawMessage(strconv.FormatBool(!always)),
	}
	m := snap.Metadata
	m.SchemaString = schema.String()
	p := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"identityColumns", "appendOnly", "invariants"}}
	if _, err := deltalog.Commit(context.Background(), tableBucket(t, cfg), snap,
		[]deltalog.Action{{MetaData: &m}, {Protocol: &p}}, deltalog.CommitOptions{Operation: "CREATE TABLE"}); err != nil {
		t.Fatal(err)
	}
}

type kv struct {
	id int64 // -1: null
	k  string
	v  int64
}

// kvBatch builds rows of (id, k, v), without id when withID is false.
func kvBatch(mem memory.Allocator, withID bool, rows ...kv) arrow.RecordBatch {
	fields := []arrow.Field{{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}
	if withID {
		fields = append([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, fields...)
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, r := range rows {
		i := 0
		if withID {
			if r.id < 0 {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*array.Int64Builder).Append(r.id)
			}
			i = 1
		}
		b.Field(i).(*array.StringBuilder).Append(r.k)
		b.Field(i + 1).(*array.Int64Builder).Append(r.v)
	}
	return b.NewRecordBatch()
}

// highWaterMark returns the table's identity high-water mark of id.
func highWaterMark(t *testing.T, cfg *Config) int64 {
	t.Helper()
	schema, err := snapshot(t, cfg).Schema()
	if err != nil {
		t.Fatal(err)
	}
	id, ok, err := schema.Fields[0].Identity()
	if err != nil || !ok || !id.Assigned {
		t.Fatalf("identity of id: %+v, %v, %v", id, ok, err)
	}
	return id.HighWaterMark
}

// TestIdentityAlways: GENERATED ALWAYS: a stream carrying the column is
// refused; rows get the values after the high-water mark, which the
// commit advances; two keys staged at once get disjoint values; a key
// whose values another writer handed out meanwhile fails with a conflict
// and publishes nothing; an upsert keeps the updated rows' values and
// gives inserted rows fresh ones.
func TestIdentityAlways(t *testing.T) {
	mem := checkedMem(t)
	uri := fileURI(t)
	identityTable(t, uri, true, 1)
	cfg := testConfig(uri)
	w := openWriter(t, cfg, mem)
	ctx := context.Background()

	with := kvBatch(mem, true, kv{5, "x", 1})
	defer with.Release()
	if err := w.CheckSchema(ctx, with.Schema()); !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("CheckSchema of a stream carrying the ALWAYS column: %v, want ErrInvalid", err)
	}

	b1 := kvBatch(mem, false, kv{0, "b", 1}, kv{0, "c", 2})
	defer b1.Release()
	b2 := kvBatch(mem, false, kv{0, "d", 3})
	defer b2.Release()
	k1, k2 := writers.TxnKey{Writer: "one", Epoch: 1}, writers.TxnKey{Writer: "two", Epoch: 1}
	d1 := precommitOne(t, w, k1, b1)
	d2 := precommitOne(t, w, k2, b2)
	for _, c := range []struct {
		k writers.TxnKey
		d writers.Descriptor
	}{{k2, d2}, {k1, d1}} {
		if _, err := w.Commit(ctx, c.k, []writers.Descriptor{c.d}); err != nil {
			t.Fatalf("Commit %s: %v", c.k, err)
		}
	}
	sameRows(t, "after appends", tableRows(t, cfg, []string{"id", "k"}), []string{"1|a", "2|b", "3|c", "4|d"})
	if hwm := highWaterMark(t, cfg); hwm != 4 {
		t.Errorf("high-water mark %d, want 4", hwm)
	}

	// Another writer hands out values meanwhile: the key's overlap.
	b3 := kvBatch(mem, false, kv{0, "e", 5})
	defer b3.Release()
	k3 := writers.TxnKey{Writer: "three", Epoch: 1}
	d3 := precommitOne(t, w, k3, b3)
	snap := snapshot(t, cfg)
	schema, _ := snap.Schema()
	schema.Fields[0] = schema.Fields[0].WithHighWaterMark(10)
	m := snap.Metadata
	m.SchemaString = schema.String()
	if _, err := deltalog.Commit(ctx, tableBucket(t, cfg), snap, []deltalog.Action{{MetaData: &m}}, deltalog.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, k3, []writers.Descriptor{d3}); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("Commit with values another writer took: %v, want ErrConflict", err)
	}

	// Upsert by k: b updated (keeps 2), f inserted (gets 11).
	up := testConfig(uri, func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"k"} })
	u := openWriter(t, up, mem)
	cl := changelog(mem, kvBatch(mem, false, kv{0, "b", 100}, kv{0, "f", 6}))
	defer cl.Release()
	commitOne(t, u, writers.TxnKey{Writer: "upsert", Epoch: 1}, cl)
	sameRows(t, "after upsert", tableRows(t, up, []string{"id", "k", "v"}), []string{"11|f|6", "1|a|0", "2|b|100", "3|c|2", "4|d|3"})
	if hwm := highWaterMark(t, cfg); hwm != 11 {
		t.Errorf("high-water mark %d, want 11", hwm)
	}
}

// changelog returns rec with an _op column of U (rec is released).
func changelog(mem memory.Allocator, rec arrow.RecordBatch) arrow.RecordBatch {
	defer rec.Release()
	b := array.NewStringBuilder(mem)
	defer b.Release()
	for range rec.NumRows() {
		b.Append("U")
	}
	op := b.NewArray()
	defer op.Release()
	fields := append(rec.Schema().Fields(), arrow.Field{Name: merge.OpColumn, Type: arrow.BinaryTypes.String, Nullable: true})
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), append(rec.Columns(), op), rec.NumRows())
}

// TestIdentityByDefault: GENERATED BY DEFAULT with a negative step: the
// client's values are kept, null ones filled counting down.
func TestIdentityByDefault(t *testing.T) {
	mem := checkedMem(t)
	uri := fileURI(t)
	identityTable(t, uri, false, -5)
	cfg := testConfig(uri)
	w := openWriter(t, cfg, mem)
	rec := kvBatch(mem, true, kv{100, "x", 1}, kv{-1, "y", 2}, kv{-1, "z", 3})
	defer rec.Release()
	commitOne(t, w, writers.AutoKey("s"), rec)
	sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k"}), []string{"-4|y", "-9|z", "100|x", "1|a"})
	if hwm := highWaterMark(t, cfg); hwm != -9 {
		t.Errorf("high-water mark %d, want -9", hwm)
	}
}

// TestIdentityHostileDescriptor: identity ranges of a descriptor (client
// input) for a column that is no identity column, or against the step,
// are ErrInvalid; values below the mark another writer set, ErrConflict.
func TestIdentityHostileDescriptor(t *testing.T) {
	schema, err := deltalog.ParseSchema(`{"type":"struct","fields":[
		{"name":"id","type":"long","nullable":true,"metadata":{"delta.identity.start":1,"delta.identity.step":1,"delta.identity.highWaterMark":10,"delta.identity.allowExplicitInsert":false}},
		{"name":"v","type":"long","nullable":true,"metadata":{}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		r    map[string]deltalayout.IdentityRange
		want error
	}{
		{"no identity column", map[string]deltalayout.IdentityRange{"v": {First: 11, Last: 12, Base: 10}}, writers.ErrInvalid},
		{"no column", map[string]deltalayout.IdentityRange{"nope": {First: 11, Last: 12, Base: 10}}, writers.ErrInvalid},
		{"reversed", map[string]deltalayout.IdentityRange{"id": {First: 12, Last: 11, Base: 10}}, writers.ErrInvalid},
		{"first not after base", map[string]deltalayout.IdentityRange{"id": {First: 10, Last: 11, Base: 10}}, writers.ErrInvalid},
		{"taken by another writer", map[string]deltalayout.IdentityRange{"id": {First: 6, Last: 8, Base: 5}}, writers.ErrConflict},
		{"fine", map[string]deltalayout.IdentityRange{"id": {First: 11, Last: 12, Base: 10}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed, err := identityHighWaterMarks(schema, []*descriptor{{Identity: tc.r}}, &deltalayout.IdentityAllocator{})
			if !errors.Is(err, tc.want) || (tc.want == nil) != changed {
				t.Fatalf("identityHighWaterMarks: %v (changed %v), want %v", err, changed, tc.want)
			}
			if tc.want == nil {
				if id, _, _ := out.Fields[0].Identity(); id.HighWaterMark != 12 {
					t.Errorf("high-water mark %d, want 12", id.HighWaterMark)
				}
			}
		})
	}
}

// TestIdentityForeignDescriptor: a descriptor whose values another
// allocator handed out (another server's, or this server's before a
// restart) is a conflict once this writer's own commits advanced the
// mark over them, not taken for this writer's; nothing is duplicated.
// Descriptors of one commit filled on two servers are refused.
func TestIdentityForeignDescriptor(t *testing.T) {
	ctx := context.Background()
	t.Run("other allocator", func(t *testing.T) {
		mem := checkedMem(t)
		uri := fileURI(t)
		identityTable(t, uri, true, 1)
		cfg := testConfig(uri)
		b := openWriter(t, cfg, mem)
		kb := writers.TxnKey{Writer: "b", Epoch: 1}
		rb := kvBatch(mem, false, kv{0, "fromB", 1})
		defer rb.Release()
		db := precommitOne(t, b, kb, rb) // takes 2 after 1
		// Another server, or the process that precommitted db
		// after kill -9: either way a Writer with a fresh allocator.
		a := openWriter(t, cfg, mem)
		ra := kvBatch(mem, false, kv{0, "fromA", 2})
		defer ra.Release()
		commitOne(t, a, writers.TxnKey{Writer: "a", Epoch: 1}, ra) // also 2
		if _, err := a.Commit(ctx, kb, []writers.Descriptor{db}); !errors.Is(err, writers.ErrConflict) {
			t.Fatalf("Commit of a descriptor of another allocator after our own advance: %v, want ErrConflict", err)
		}
		sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k"}), []string{"1|a", "2|fromA"})
	})
	t.Run("one commit, two servers", func(t *testing.T) {
		mem := checkedMem(t)
		uri := fileURI(t)
		identityTable(t, uri, true, 1)
		cfg := testConfig(uri)
		a, b := openWriter(t, cfg, mem), openWriter(t, cfg, mem)
		k := writers.TxnKey{Writer: "k", Epoch: 1}
		ra, rb := kvBatch(mem, false, kv{0, "onA", 1}), kvBatch(mem, false, kv{0, "onB", 2})
		defer ra.Release()
		defer rb.Release()
		da, db := precommitOne(t, a, k, ra), precommitOne(t, b, k, rb)
		_, err := a.Commit(ctx, k, []writers.Descriptor{da, db})
		if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "one server") {
			t.Fatalf("Commit of identity values of two servers: %v, want ErrInvalid naming the rule", err)
		}
	})
}

// TestIdentityNotNull: a NOT NULL identity column is filled, not refused:
// GENERATED ALWAYS with a stream without it, BY DEFAULT with nulls.
func TestIdentityNotNull(t *testing.T) {
	for _, always := range []bool{true, false} {
		t.Run(map[bool]string{true: "always", false: "by default"}[always], func(t *testing.T) {
			mem := checkedMem(t)
			uri := fileURI(t)
			identityTable(t, uri, always, 1)
			cfg := testConfig(uri)
			snap := snapshot(t, cfg)
			schema, err := snap.Schema()
			if err != nil {
				t.Fatal(err)
			}
			schema.Fields[0].Nullable = false
			m := snap.Metadata
			m.SchemaString = schema.String()
			if _, err := deltalog.Commit(context.Background(), tableBucket(t, cfg), snap, []deltalog.Action{{MetaData: &m}}, deltalog.CommitOptions{}); err != nil {
				t.Fatal(err)
			}
			w := openWriter(t, cfg, mem)
			rec := kvBatch(mem, !always, kv{-1, "b", 1})
			defer rec.Release()
			commitOne(t, w, writers.AutoKey("s"), rec)
			sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k"}), []string{"1|a", "2|b"})
		})
	}
}
