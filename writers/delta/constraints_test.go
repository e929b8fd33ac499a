package delta

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// addConstraints commits to the table of cfg, as Spark's ALTER TABLE …
// ADD CONSTRAINT does, the CHECK constraints cons (name → expression) and
// the column invariants invs (column → expression), with the protocol
// features they need.
func addConstraints(t *testing.T, cfg *Config, cons, invs map[string]string) {
	t.Helper()
	if err := putConstraints(tableBucket(t, cfg), snapshot(t, cfg), cons, invs); err != nil {
		t.Fatal(err)
	}
}

// putConstraints writes addConstraints' commit after snap as Spark would,
// without deltalog.Commit, which refuses tables Quiver cannot write.
func putConstraints(bucket *storage.Bucket, snap *deltalog.Snapshot, cons, invs map[string]string) error {
	m := snap.Metadata
	m.Configuration = maps.Clone(m.Configuration)
	if m.Configuration == nil {
		m.Configuration = map[string]string{}
	}
	for name, expr := range cons {
		m.Configuration[deltalog.ConstraintPrefix+name] = expr
	}
	if len(invs) > 0 {
		schema, err := snap.Schema()
		if err != nil {
			return err
		}
		for i, f := range schema.Fields {
			if expr, ok := invs[f.Name]; ok {
				doc, _ := json.Marshal(map[string]any{"expression": map[string]string{"expression": expr}})
				raw, _ := json.Marshal(string(doc))
				f.Metadata = maps.Clone(f.Metadata)
				if f.Metadata == nil {
					f.Metadata = map[string]json.RawMessage{}
				}
				f.Metadata["delta.invariants"] = raw
				schema.Fields[i] = f
			}
		}
		m.SchemaString = schema.String()
	}
	p := snap.Protocol
	if p.MinWriterVersion < 3 {
		p.MinWriterVersion = 3 // implies invariants and checkConstraints
	} else if p.MinWriterVersion == 7 {
		for _, f := range []string{"invariants", "checkConstraints"} {
			if !slices.Contains(p.WriterFeatures, f) {
				p.WriterFeatures = append(slices.Clip(p.WriterFeatures), f)
			}
		}
	}
	commit, err := deltalog.EncodeCommit([]deltalog.Action{{MetaData: &m}, {Protocol: &p}})
	if err != nil {
		return err
	}
	return bucket.Put(context.Background(), deltalog.CommitKey(snap.Version+1), commit)
}

// constrainedTable creates a table (id long, k string, v long) with the
// row (1, "a", 0) and the given constraints.
func constrainedTable(t *testing.T, cons, invs map[string]string) (*Config, *Writer) {
	t.Helper()
	mem := checkedMem(t)
	cfg := testConfig(fileURI(t))
	w := openWriter(t, cfg, mem)
	seed := kvBatch(mem, true, kv{1, "a", 0})
	defer seed.Release()
	commitOne(t, w, writers.AutoKey("seed"), seed)
	addConstraints(t, cfg, cons, invs)
	return cfg, openWriter(t, cfg, mem)
}

// wantViolation checks that err is ErrInvalid naming every one of want.
func wantViolation(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("%s: %v, want ErrInvalid", what, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not name %q", what, err, w)
		}
	}
}

// TestConstraintsAppend: rows satisfying every CHECK constraint and
// invariant are published; a batch with a row that makes one false or
// NULL (a missing column filled with nulls too) is refused naming the
// constraint, its expression and the row's values, and nothing of it is
// published.
func TestConstraintsAppend(t *testing.T) {
	cfg, w := constrainedTable(t, map[string]string{
		"id_range": "id IS NOT NULL AND id BETWEEN 1 AND 1000",
		"known_k":  "k IN ('a', 'b', 'c') OR (k > 'x' AND v <> 7)",
	}, map[string]string{"v": "v < 100"})
	mem := w.mem
	ctx := context.Background()

	ok := kvBatch(mem, true, kv{2, "b", 1}, kv{3, "y", 99}, kv{1000, "c", -5})
	defer ok.Release()
	commitOne(t, w, writers.AutoKey("ok"), ok)
	sameRows(t, "valid rows", tableRows(t, cfg, []string{"id", "k", "v"}), []string{"1000|c|-5", "1|a|0", "2|b|1", "3|y|99"})
	version := snapshot(t, cfg).Version

	for _, c := range []struct {
		name string
		rows []kv
		want []string
	}{
		{"false", []kv{{4, "a", 1}, {1001, "a", 1}}, []string{"CHECK constraint id_range", "id BETWEEN 1 AND 1000", "id=1001"}},
		{"null", []kv{{-1, "a", 1}}, []string{"id_range", "id=NULL"}},
		{"second constraint", []kv{{5, "z", 7}}, []string{"known_k", "k=z, v=7"}},
		{"invariant", []kv{{5, "a", 100}}, []string{"invariant on column v", "v < 100", "v=100"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := kvBatch(mem, true, c.rows...)
			defer bad.Release()
			key := writers.TxnKey{Writer: "bad-" + c.name, Epoch: 1}
			wantViolation(t, "Write", w.Write(ctx, key, bad), c.want...)
			if err := w.Rollback(ctx, key); err != nil {
				t.Fatal(err)
			}
		})
	}
	// A stream without id: the column is null in its rows.
	noID := kvBatch(mem, false, kv{0, "a", 1})
	defer noID.Release()
	wantViolation(t, "Write without id", w.Write(ctx, writers.AutoKey("noid"), noID), "id_range", "id=NULL")
	if err := w.Rollback(ctx, writers.AutoKey("noid")); err != nil {
		t.Fatal(err)
	}
	if v := snapshot(t, cfg).Version; v != version {
		t.Fatalf("refused rows published: version %d, want %d", v, version)
	}
}

// TestConstraintsUpsert: an upsert checks the rows it writes, as
// written: an update whose changelog lacks a column keeps the row's
// value (and passes), an insert lacking it gets NULL (and violates); a
// refused precommit publishes nothing and the table keeps its rows.
func TestConstraintsUpsert(t *testing.T) {
	cfg, _ := constrainedTable(t, map[string]string{"id_set": "id IS NOT NULL", "small": "v <= 10"}, nil)
	up := testConfig(cfg.TableURI, func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"k"} })
	mem := checkedMem(t)
	u := openWriter(t, up, mem)
	ctx := context.Background()

	// Update a (id kept from the table), insert b with an id.
	upd := changelog(mem, kvBatch(mem, false, kv{0, "a", 5}))
	defer upd.Release()
	commitOne(t, u, writers.TxnKey{Writer: "up", Epoch: 1}, upd)
	ins := changelog(mem, kvBatch(mem, true, kv{2, "b", 6}))
	defer ins.Release()
	commitOne(t, u, writers.TxnKey{Writer: "up", Epoch: 2}, ins)
	want := []string{"1|a|5", "2|b|6"}
	sameRows(t, "upserted", tableRows(t, up, []string{"id", "k", "v"}), want)
	version := snapshot(t, up).Version

	for _, c := range []struct {
		name string
		rec  func() []kv
		id   bool
		want []string
	}{
		{"insert without id", func() []kv { return []kv{{0, "new", 1}} }, false, []string{"id_set", "id IS NOT NULL", "id=NULL"}},
		{"update breaking v", func() []kv { return []kv{{1, "a", 11}} }, true, []string{"CHECK constraint small", "v=11"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := changelog(mem, kvBatch(mem, c.id, c.rec()...))
			defer rec.Release()
			key := writers.TxnKey{Writer: "bad-" + c.name, Epoch: 1}
			if err := u.Write(ctx, key, rec); err != nil {
				t.Fatal(err)
			}
			_, err := u.Precommit(ctx, key)
			wantViolation(t, "Precommit", err, c.want...)
			if err := u.Rollback(ctx, key); err != nil {
				t.Fatal(err)
			}
		})
	}
	if v := snapshot(t, up).Version; v != version {
		t.Fatalf("refused upsert published: version %d, want %d", v, version)
	}
	sameRows(t, "after refusals", tableRows(t, up, []string{"id", "k", "v"}), want)
}

// TestConstraintsAddedConcurrently: rows checked before another writer
// added a constraint are not published: the commit is a conflict
// (ErrConflict), also for an upsert; a replay checks them against the
// new constraint. Rows checked against the table's constraints commit.
func TestConstraintsAddedConcurrently(t *testing.T) {
	cfg, w := constrainedTable(t, map[string]string{"pos": "v >= 0"}, nil)
	mem := w.mem
	ctx := context.Background()
	rec := kvBatch(mem, true, kv{2, "b", 50})
	defer rec.Release()
	key := writers.TxnKey{Writer: "racer", Epoch: 1}
	d := precommitOne(t, w, key, rec)

	up := testConfig(cfg.TableURI, func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"k"} })
	u := openWriter(t, up, mem)
	urec := changelog(mem, kvBatch(mem, true, kv{3, "c", 60}))
	defer urec.Release()
	ukey := writers.TxnKey{Writer: "upserter", Epoch: 1}
	ud := precommitOne(t, u, ukey, urec)

	addConstraints(t, cfg, map[string]string{"small": "v < 10"}, nil)
	version := snapshot(t, cfg).Version
	if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); !errors.Is(err, writers.ErrConflict) || !strings.Contains(err.Error(), "small") {
		t.Fatalf("Commit of rows checked before the constraint: %v, want ErrConflict naming it", err)
	}
	if _, err := u.Commit(ctx, ukey, []writers.Descriptor{ud}); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("upsert Commit of rows checked before the constraint: %v, want ErrConflict", err)
	}
	if v := snapshot(t, cfg).Version; v != version {
		t.Fatalf("unchecked rows published: version %d, want %d", v, version)
	}
	// The replay is checked against the new constraint.
	if err := w.Rollback(ctx, key); err != nil {
		t.Fatal(err)
	}
	wantViolation(t, "replay", w.Write(ctx, key, rec), "small", "v=50")
	if err := w.Rollback(ctx, key); err != nil {
		t.Fatal(err)
	}
	fine := kvBatch(mem, true, kv{4, "d", 5})
	defer fine.Release()
	commitOne(t, w, writers.TxnKey{Writer: "racer", Epoch: 2}, fine)
	sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k", "v"}), []string{"1|a|0", "4|d|5"})
}

// TestConstraintsRefused: a table whose constraint is outside the
// evaluated subset, or does not fit its columns, is refused at open,
// naming the constraint and the construct.
func TestConstraintsRefused(t *testing.T) {
	for expr, want := range map[string]string{
		"length(k) > 0":    "function length",
		"v + 1 > 0":        "operator +",
		"k LIKE 'a%'":      "LIKE",
		"k > 5":            "comparison of string and integer",
		"nope IS NOT NULL": "column nope does not exist",
		strings.Repeat("(", 100) + "v > 0" + strings.Repeat(")", 100): "deeper",
	} {
		mem := checkedMem(t)
		cfg := testConfig(fileURI(t))
		w := openWriter(t, cfg, mem)
		seed := kvBatch(mem, true, kv{1, "a", 0})
		commitOne(t, w, writers.AutoKey("seed"), seed)
		seed.Release()
		addConstraints(t, cfg, map[string]string{"rule": expr}, nil)
		w2, err := New(cfg, writers.Env{Endpoint: "test", ConfigDir: t.TempDir(), Allocator: mem})
		if err != nil {
			t.Fatal(err)
		}
		err = w2.Open(context.Background())
		if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "constraint rule") || !strings.Contains(err.Error(), want) {
			t.Errorf("Open with constraint %q: %v, want ErrInvalid naming the constraint and %q", expr, err, want)
		}
		if err := w2.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// TestConstraintsColumnMapping: constraints name logical columns (a
// renamed one, a struct member) of a column-mapped table; rows are
// checked by those names while files hold physical ones.
func TestConstraintsColumnMapping(t *testing.T) {
	cfg, _, mem := mappedTable(t, "name", false, func(*Config) {})
	addConstraints(t, cfg, map[string]string{"label_ok": "`label` <> 'bad'", "st_a": "st.a >= 0 AND id > 2"}, nil)
	w := openWriter(t, cfg, mem)
	ok := mappedBatch(mem, false, mappedRow{3, "c", 3, 0})
	defer ok.Release()
	commitOne(t, w, writers.AutoKey("ok"), ok)
	ctx := context.Background()
	for _, row := range []mappedRow{{4, "bad", 1, 0}, {5, "e", -1, 0}} {
		bad := mappedBatch(mem, false, row)
		err := w.Write(ctx, writers.AutoKey("bad"), bad)
		bad.Release()
		wantViolation(t, "Write", err, "violated")
		if err := w.Rollback(ctx, writers.AutoKey("bad")); err != nil {
			t.Fatal(err)
		}
	}
	rows := tableRows(t, cfg, []string{"id", "label"})
	if !slices.Contains(rows, "3|c") || slices.Contains(rows, "4|bad") || slices.Contains(rows, "5|e") {
		t.Fatalf("rows %q: want 3|c and neither refused row", rows)
	}
	checkPhysicalFiles(t, cfg)
}

// TestConstraintsReadmitBypass: a key whose files were checked against
// the table's constraints, re-admitted (a batch of another schema) after
// a constraint was added and the writer read it, does not label its
// earlier files as checked against the new one: the re-admit is a
// conflict and the rows are never published.
func TestConstraintsReadmitBypass(t *testing.T) {
	cfg, w := constrainedTable(t, map[string]string{"pos": "v >= 0"}, nil)
	mem := w.mem
	ctx := context.Background()
	key := writers.TxnKey{Writer: "k", Epoch: 1}
	big := kvBatch(mem, true, kv{2, "b", 50})
	defer big.Release()
	if err := w.Write(ctx, key, big); err != nil {
		t.Fatal(err)
	}
	addConstraints(t, cfg, map[string]string{"small": "v < 10"}, nil)

	// Another key's commit conflicts but makes the writer read the new
	// constraint.
	other := writers.TxnKey{Writer: "other", Epoch: 1}
	fine := kvBatch(mem, true, kv{4, "d", 5})
	defer fine.Release()
	d := precommitOne(t, w, other, fine)
	if _, err := w.Commit(ctx, other, []writers.Descriptor{d}); !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("Commit of rows checked before the constraint: %v, want ErrConflict", err)
	}

	// A batch without id: a different Arrow schema, re-admitted.
	noID := kvBatch(mem, false, kv{0, "e", 1})
	defer noID.Release()
	err := w.Write(ctx, key, noID)
	if err == nil {
		var dk writers.Descriptor
		if dk, err = w.Precommit(ctx, key); err == nil {
			_, err = w.Commit(ctx, key, []writers.Descriptor{dk})
		}
	}
	if !errors.Is(err, writers.ErrConflict) {
		t.Fatalf("re-admitted key: %v, want ErrConflict", err)
	}
	sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k", "v"}), []string{"1|a|0"})
}

// TestConstraintsDictionary: a stream sending a column dictionary-encoded
// is checked on its values.
func TestConstraintsDictionary(t *testing.T) {
	cfg, w := constrainedTable(t, map[string]string{"known_k": "k IN ('a', 'b')"}, nil)
	mem := w.mem
	ctx := context.Background()
	batch := func(ks ...string) arrow.RecordBatch {
		dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
		schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "k", Type: dt, Nullable: true}, {Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for i, k := range ks {
			b.Field(0).(*array.Int64Builder).Append(int64(10 + i))
			if err := b.Field(1).(*array.BinaryDictionaryBuilder).AppendString(k); err != nil {
				t.Fatal(err)
			}
			b.Field(2).(*array.Int64Builder).Append(1)
		}
		return b.NewRecordBatch()
	}
	ok := batch("a", "b", "a")
	defer ok.Release()
	commitOne(t, w, writers.AutoKey("ok"), ok)
	bad := batch("b", "z")
	defer bad.Release()
	wantViolation(t, "Write", w.Write(ctx, writers.AutoKey("bad"), bad), "known_k", "k=z")
	sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k"}), []string{"10|a", "11|b", "12|a", "1|a"})
}

// TestConstraintsAddedUnsupported: a constraint outside the subset added
// after the writer opened makes commits and writes fail as an
// unsupported table (deltalog.ErrUnsupported, as Open refuses it), and
// nothing is published.
func TestConstraintsAddedUnsupported(t *testing.T) {
	cfg, w := constrainedTable(t, map[string]string{"pos": "v >= 0"}, nil)
	mem := w.mem
	ctx := context.Background()
	rec := kvBatch(mem, true, kv{2, "b", 5})
	defer rec.Release()
	key := writers.TxnKey{Writer: "k", Epoch: 1}
	d := precommitOne(t, w, key, rec)
	addConstraints(t, cfg, map[string]string{"name_len": "length(k) > 0"}, nil)
	version := snapshot(t, cfg).Version
	_, err := w.Commit(ctx, key, []writers.Descriptor{d})
	if !errors.Is(err, deltalog.ErrUnsupported) || !strings.Contains(err.Error(), "name_len") {
		t.Fatalf("Commit: %v, want ErrUnsupported naming name_len", err)
	}
	// Every snapshot the writer reads is checked (latest): a new key's
	// rows are refused too, at the latest by their commit.
	k2 := writers.TxnKey{Writer: "k2", Epoch: 1}
	err = w.Write(ctx, k2, rec)
	if err == nil {
		var d2 writers.Descriptor
		if d2, err = w.Precommit(ctx, k2); err == nil {
			_, err = w.Commit(ctx, k2, []writers.Descriptor{d2})
		}
	}
	if !errors.Is(err, deltalog.ErrUnsupported) || !strings.Contains(err.Error(), "name_len") {
		t.Fatalf("second key: %v, want ErrUnsupported naming name_len", err)
	}
	if v := snapshot(t, cfg).Version; v != version {
		t.Fatalf("published: version %d, want %d", v, version)
	}
}
