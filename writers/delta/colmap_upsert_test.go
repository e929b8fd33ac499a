package delta

import (
	"context"
	"maps"
	"strconv"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// alterTable commits one metaData action changing the table's schema and
// configuration by change, as Spark's ALTER TABLE does: no data file is
// touched.
func alterTable(t *testing.T, cfg *Config, op string, change func(schema *deltalog.Schema, conf map[string]string)) {
	t.Helper()
	snap := snapshot(t, cfg)
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	m := snap.Metadata
	m.Configuration = maps.Clone(m.Configuration)
	change(schema, m.Configuration)
	m.SchemaString = schema.String()
	if _, err := deltalog.Commit(context.Background(), tableBucket(t, cfg), snap, []deltalog.Action{{MetaData: &m}}, deltalog.CommitOptions{Operation: op}); err != nil {
		t.Fatal(err)
	}
}

// toColumnMapped turns cfg's table into a column-mapped one (name mode)
// without files, as a table created with column mapping on is: its
// columns get ids and physical names, and its files are removed.
func toColumnMapped(t *testing.T, cfg *Config) {
	t.Helper()
	snap := snapshot(t, cfg)
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	top, err := deltalog.AssignColumnMapping(schema, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := snap.Metadata
	m.SchemaString = schema.String()
	m.Configuration = map[string]string{deltalog.ColumnMappingModeKey: "name", deltalog.ColumnMappingMaxIDKey: strconv.FormatInt(top, 10)}
	p := deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"columnMapping"}, WriterFeatures: []string{"columnMapping"}}
	actions := []deltalog.Action{{MetaData: &m}, {Protocol: &p}}
	for _, a := range snap.Files() {
		actions = append(actions, deltalog.Action{Remove: a.Remove(1, true)})
	}
	if _, err := deltalog.Commit(context.Background(), tableBucket(t, cfg), snap, actions, deltalog.CommitOptions{Operation: "CREATE OR REPLACE TABLE"}); err != nil {
		t.Fatal(err)
	}
}

// mappedKV returns the config of a fresh column-mapped table of kvBatch's
// columns (id, k, v; no rows) upserted by merge key id.
func mappedKV(t *testing.T) *Config {
	t.Helper()
	mem := checkedMem(t)
	cfg := testConfig(fileURI(t))
	seed := kvBatch(mem, true, kv{0, "seed", 0})
	defer seed.Release()
	commitOne(t, openWriter(t, cfg, mem), writers.AutoKey("seed"), seed)
	toColumnMapped(t, cfg)
	return testConfig(cfg.TableURI, func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"id"} })
}

// renameFields renames the table's top-level fields by names (old → new,
// applied at once, so two columns may swap names), as Spark's ALTER TABLE
// … RENAME COLUMN does on a column-mapped table: the physical names stay.
func renameFields(names map[string]string) func(*deltalog.Schema, map[string]string) {
	return func(s *deltalog.Schema, _ map[string]string) {
		for i, f := range s.Fields {
			if n, ok := names[f.Name]; ok {
				s.Fields[i].Name = n
			}
		}
	}
}

// TestKeyCacheColumnRename: an upsert indexes the keys of its file; then
// the key column and another column of the same type swap names (two
// renames: the key's values are now the other physical column's). The
// next upsert through the same writer matches by the new mapping, not by
// the keys it indexed under the old one: every key is in the table
// exactly once, none lost.
func TestKeyCacheColumnRename(t *testing.T) {
	mem := checkedMem(t)
	cfg := mappedKV(t)
	w := openWriter(t, cfg, mem)
	cols := []string{"id", "k", "v"}
	first := kvBatch(mem, true, kv{1, "a", 10}, kv{2, "b", 20})
	defer first.Release()
	commitOne(t, w, writers.TxnKey{Writer: "up", Epoch: 1}, first)
	// Upserting again makes sure the file's keys are indexed (the commit
	// indexes them in the background; this precommit waits for that).
	again := kvBatch(mem, true, kv{3, "c", 30})
	defer again.Release()
	commitOne(t, w, writers.TxnKey{Writer: "up", Epoch: 2}, again)
	if w.keys.usedBytes() == 0 {
		t.Fatal("no file's keys are indexed")
	}

	alterTable(t, cfg, "RENAME COLUMN", renameFields(map[string]string{"id": "v", "v": "id"}))
	sameRows(t, "after the renames", tableRows(t, cfg, cols), []string{"10|a|1", "20|b|2", "30|c|3"})
	// The writer reads the renames before admitting the rows.
	if _, err := w.latest(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Key 2 was indexed (old mapping) at a row whose id is now 20; key 10
	// is that of the first row now.
	changes := kvBatch(mem, true, kv{2, "x", 100}, kv{10, "y", 200})
	defer changes.Release()
	commitOne(t, w, writers.TxnKey{Writer: "up", Epoch: 3}, changes)
	sameRows(t, "after the upsert", tableRows(t, cfg, cols), []string{"10|y|200", "20|b|2", "2|x|100", "30|c|3"})
}
