package delta

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
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
func toColumnMapped(t *testing.T, cfg *Config) { toColumnMode(t, cfg, "name") }

// toColumnMode is toColumnMapped in column mapping mode mode.
func toColumnMode(t *testing.T, cfg *Config, mode string) {
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
	m.Configuration = map[string]string{deltalog.ColumnMappingModeKey: mode, deltalog.ColumnMappingMaxIDKey: strconv.FormatInt(top, 10)}
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
func mappedKV(t *testing.T) *Config { return mappedKVMode(t, "name") }

// mappedKVMode is mappedKV in column mapping mode mode.
func mappedKVMode(t *testing.T, mode string) *Config {
	t.Helper()
	mem := checkedMem(t)
	cfg := testConfig(fileURI(t))
	seed := kvBatch(mem, true, kv{0, "seed", 0})
	defer seed.Release()
	commitOne(t, openWriter(t, cfg, mem), writers.AutoKey("seed"), seed)
	toColumnMode(t, cfg, mode)
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
	if w.keys.UsedBytes() == 0 {
		t.Fatal("no file's keys are indexed")
	}

	alterTable(t, cfg, "RENAME COLUMN", renameFields(map[string]string{"id": "v", "v": "id"}))
	sameRows(t, "after the renames", tableRows(t, cfg, cols), []string{"10|a|1", "20|b|2", "30|c|3"})
	// Key 2 was indexed (old mapping) at a row whose id is now 20; key 10
	// is that of the first row now.
	changes := kvBatch(mem, true, kv{2, "x", 100}, kv{10, "y", 200})
	defer changes.Release()
	commitOne(t, w, writers.TxnKey{Writer: "up", Epoch: 3}, changes)
	sameRows(t, "after the upsert", tableRows(t, cfg, cols), []string{"10|y|200", "20|b|2", "2|x|100", "30|c|3"})
}

// dropAndAdd drops the table's column name and adds a new one of that name
// and type (a new physical name and id above maxColumnId), as Spark's
// ALTER TABLE … DROP COLUMN then ADD COLUMNS do on a column-mapped table.
func dropAndAdd(t *testing.T, name string) func(*deltalog.Schema, map[string]string) {
	return func(s *deltalog.Schema, conf map[string]string) {
		for i, f := range s.Fields {
			if f.Name == name {
				s.Fields = append(s.Fields[:i:i], s.Fields[i+1:]...)
				s.Fields = append(s.Fields, deltalog.StructField{Name: name, Type: f.Type, Nullable: true})
				break
			}
		}
		top, err := deltalog.AssignColumnMapping(s, nil, deltalog.MaxColumnID(conf))
		if err != nil {
			t.Fatal(err)
		}
		conf[deltalog.ColumnMappingMaxIDKey] = strconv.FormatInt(top, 10)
	}
}

// TestUpsertKeyColumnMissingInFiles: files written before their table got
// its key column hold no such column; Delta reads it as null there, and a
// null key matches nothing, so an upsert leaves their rows alone and
// inserts its keys (with deletion vectors and without). The key column is
// one dropped and added again in a column-mapped table, or one an append
// added (schema_evolution: add_columns) to a table without column mapping.
func TestUpsertKeyColumnMissingInFiles(t *testing.T) {
	for _, dv := range []bool{false, true} {
		t.Run("dropped and added/dv="+strconv.FormatBool(dv), func(t *testing.T) {
			mem := checkedMem(t)
			cfg := mappedKV(t)
			cfg.DeletionVectors = dv
			if dv {
				enableDeletionVectors(t, cfg)
			}
			w := openWriter(t, cfg, mem)
			seed := kvBatch(mem, true, kv{1, "a", 10}, kv{2, "b", 20})
			defer seed.Release()
			commitOne(t, w, writers.TxnKey{Writer: "up", Epoch: 1}, seed)
			alterTable(t, cfg, "DROP AND ADD COLUMN", dropAndAdd(t, "id"))
			for epoch, rows := range [][]kv{{{1, "x", 100}}, {{1, "y", 200}, {3, "c", 30}}} {
				rec := kvBatch(mem, true, rows...)
				commitOne(t, w, writers.TxnKey{Writer: "up", Epoch: int64(2 + epoch)}, rec)
				rec.Release()
			}
			sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k", "v"}), []string{"1|y|200", "3|c|30", "∅|a|10", "∅|b|20"})
		})
	}
	t.Run("added by an append", func(t *testing.T) {
		mem := checkedMem(t)
		cfg := testConfig(fileURI(t), func(c *Config) { c.SchemaEvolution = EvolveAddColumns })
		app := openWriter(t, cfg, mem)
		old := kvBatch(mem, false, kv{-1, "a", 10})
		defer old.Release()
		commitOne(t, app, writers.AutoKey("old"), old)
		withID := kvBatch(mem, true, kv{1, "b", 20})
		defer withID.Release()
		commitOne(t, app, writers.AutoKey("new"), withID)

		up := testConfig(cfg.TableURI, func(c *Config) { c.WriteMode, c.MergeKeys = ModeUpsert, []string{"id"} })
		rec := kvBatch(mem, true, kv{1, "x", 100}, kv{2, "c", 30})
		defer rec.Release()
		commitOne(t, openWriter(t, up, mem), writers.TxnKey{Writer: "up", Epoch: 1}, rec)
		sameRows(t, "rows", tableRows(t, up, []string{"id", "k", "v"}), []string{"1|x|100", "2|c|30", "∅|a|10"})
	})
}

// enableDeletionVectors lets writers of cfg's table add deletion vectors
// (the property and the table feature), as Spark's ALTER TABLE … SET
// TBLPROPERTIES ('delta.enableDeletionVectors' = true) does.
func enableDeletionVectors(t *testing.T, cfg *Config) {
	t.Helper()
	snap := snapshot(t, cfg)
	m := snap.Metadata
	m.Configuration = maps.Clone(m.Configuration)
	m.Configuration[enableDVProperty] = "true"
	p := snap.Protocol
	p.ReaderFeatures = append(slices.Clone(p.ReaderFeatures), "deletionVectors")
	p.WriterFeatures = append(slices.Clone(p.WriterFeatures), "deletionVectors")
	if _, err := deltalog.Commit(context.Background(), tableBucket(t, cfg), snap, []deltalog.Action{{MetaData: &m}, {Protocol: &p}}, deltalog.CommitOptions{Operation: "SET TBLPROPERTIES"}); err != nil {
		t.Fatal(err)
	}
}

// TestUpsertAfterAlterTable: an outside ALTER TABLE on a column-mapped
// table (two columns swapping names; a column dropped and added again)
// before an upsert's stream, or between its rows and its precommit,
// through a writer that read the table before: the upsert's first
// attempt commits (it plans and writes under the table's latest mapping)
// and every key is in the table once.
func TestUpsertAfterAlterTable(t *testing.T) {
	for _, alter := range []struct {
		name   string
		change func(*deltalog.Schema, map[string]string)
		want   []string
	}{
		// id and v swap: the rows (1,a,10) and (2,b,20) read (10,a,1) and (20,b,2).
		{"swap", renameFields(map[string]string{"id": "v", "v": "id"}), []string{"10|y|200", "1|x|100", "20|b|2"}},
		// k dropped and added again: null in the old rows.
		{"drop and add", nil, []string{"10|y|200", "1|x|100", "2|∅|20"}},
	} {
		for _, between := range []bool{false, true} {
			t.Run(alter.name+"/between="+strconv.FormatBool(between), func(t *testing.T) {
				mem := checkedMem(t)
				cfg := mappedKV(t)
				w := openWriter(t, cfg, mem)
				seed := kvBatch(mem, true, kv{1, "a", 10}, kv{2, "b", 20})
				defer seed.Release()
				commitOne(t, w, writers.TxnKey{Writer: "up", Epoch: 1}, seed)
				change := alter.change
				if change == nil {
					change = dropAndAdd(t, "k")
				}
				if !between {
					alterTable(t, cfg, "ALTER TABLE", change)
				}
				ctx := context.Background()
				key := writers.TxnKey{Writer: "up", Epoch: 2}
				rec := kvBatch(mem, true, kv{1, "x", 100}, kv{10, "y", 200})
				defer rec.Release()
				if err := w.Write(ctx, key, rec); err != nil {
					t.Fatalf("Write: %v", err)
				}
				if between {
					alterTable(t, cfg, "ALTER TABLE", change)
				}
				d, err := w.Precommit(ctx, key)
				if err != nil {
					t.Fatalf("Precommit: %v", err)
				}
				if _, err := w.Commit(ctx, key, []writers.Descriptor{d}); err != nil {
					t.Fatalf("Commit (first attempt): %v", err)
				}
				sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k", "v"}), alter.want)
			})
		}
	}
}

// TestAppendAfterAlterTable: an append through a writer that read a
// column-mapped table before an outside ALTER TABLE (two columns swap
// names) commits at its first attempt, its rows under the new mapping.
func TestAppendAfterAlterTable(t *testing.T) {
	mem := checkedMem(t)
	cfg := testConfig(mappedKV(t).TableURI)
	w := openWriter(t, cfg, mem)
	first := kvBatch(mem, true, kv{1, "a", 10})
	defer first.Release()
	commitOne(t, w, writers.AutoKey("a"), first)
	alterTable(t, cfg, "RENAME COLUMN", renameFields(map[string]string{"id": "v", "v": "id"}))
	second := kvBatch(mem, true, kv{2, "b", 20})
	defer second.Release()
	commitOne(t, w, writers.AutoKey("b"), second)
	sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k", "v"}), []string{"10|a|1", "2|b|20"})
}

// TestUpsertIDModeKeyByFieldID: in id mode readers find a file's columns
// by Parquet field id, not by name. After the key column's physical name
// changed with its id kept, an upsert still finds key 1 in the file
// written under the old name and updates it (was: read as missing, so
// null, and inserted a second time).
func TestUpsertIDModeKeyByFieldID(t *testing.T) {
	mem := checkedMem(t)
	cfg := mappedKVMode(t, "id")
	w := openWriter(t, cfg, mem)
	seed := kvBatch(mem, true, kv{1, "a", 10})
	defer seed.Release()
	commitOne(t, w, writers.TxnKey{Writer: "up", Epoch: 1}, seed)
	alterTable(t, cfg, "ALTER TABLE", func(s *deltalog.Schema, _ map[string]string) {
		for i, f := range s.Fields {
			if f.Name == "id" {
				s.Fields[i].Metadata = maps.Clone(f.Metadata)
				s.Fields[i].Metadata["delta.columnMapping.physicalName"] = json.RawMessage(`"id-elsewhere"`)
			}
		}
	})
	rec := kvBatch(mem, true, kv{1, "x", 100})
	defer rec.Release()
	commitOne(t, w, writers.TxnKey{Writer: "up", Epoch: 2}, rec)
	sameRows(t, "rows", tableRows(t, cfg, []string{"id", "k", "v"}), []string{"1|x|100"})
}

// TestUpsertAfterPartitionRename: after Spark renamed a partition column
// of a column-mapped table, the endpoint's partition_by names no
// partition column: the upsert fails with InvalidArgument saying to set
// partition_by (a replay alone would fail again), publishing nothing.
func TestUpsertAfterPartitionRename(t *testing.T) {
	mem := checkedMem(t)
	cfg := mappedPartitioned(t, mem)
	up := testConfig(cfg.TableURI, func(c *Config) {
		c.WriteMode, c.MergeKeys, c.PartitionBy = ModeUpsert, []string{"id"}, []string{"k"}
	})
	w := openWriter(t, up, mem)

	snap := snapshot(t, cfg)
	schema, err := snap.Schema()
	if err != nil {
		t.Fatal(err)
	}
	renameFields(map[string]string{"k": "k2"})(schema, nil)
	m := snap.Metadata
	m.SchemaString, m.PartitionColumns = schema.String(), []string{"k2"}
	if _, err := deltalog.Commit(context.Background(), tableBucket(t, cfg), snap, []deltalog.Action{{MetaData: &m}}, deltalog.CommitOptions{Operation: "RENAME COLUMN"}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, cfg).Version

	ctx := context.Background()
	key := writers.TxnKey{Writer: "up", Epoch: 1}
	rec := kvBatch(mem, true, kv{1, "a", 10})
	defer rec.Release()
	err = w.Write(ctx, key, rec)
	if err == nil {
		_, err = w.Precommit(ctx, key)
	}
	if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), "set partition_by") {
		t.Fatalf("upsert after a partition column rename: %v, want ErrInvalid saying to set partition_by", err)
	}
	if v := snapshot(t, cfg).Version; v != before {
		t.Errorf("version %d, want %d", v, before)
	}
}
