package delta

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// TestKeyCacheEvictsLeastRecentlyUsed: the cache stays within its bytes,
// dropping the file used longest ago, never keeps a file larger than
// itself, and drops files no longer live on demand.
func TestKeyCacheEvictsLeastRecentlyUsed(t *testing.T) {
	file := func(path string, keys int) *fileKeys {
		x := merge.NewKeyIndex(keys)
		for i := range keys {
			x.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), uint64(i))
		}
		return &fileKeys{path: path, index: x, rows: int64(keys)}
	}
	one := file("a", 1000)
	size := one.index.MemoryBytes() + 1
	used := prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"})
	c := newKeyCache(int64(2*size+10), used)
	c.put(one)
	c.put(file("b", 1000))
	c.get("a", "") // a is now the most recently used
	c.put(file("c", 1000))
	if c.get("b", "") != nil || c.get("a", "") == nil || c.get("c", "") == nil {
		t.Fatalf("after a third file: b cached %v, a %v, c %v; want b evicted", c.get("b", "") != nil, c.get("a", "") != nil, c.get("c", "") != nil)
	}
	if c.usedBytes() > 2*size+10 || testutil.ToFloat64(used) != float64(c.usedBytes()) {
		t.Fatalf("cache holds %d bytes (gauge %v), more than its %d or not reported", c.usedBytes(), testutil.ToFloat64(used), 2*size+10)
	}
	c.put(file("huge", 100_000))
	if c.get("huge", "") != nil || c.get("a", "") == nil {
		t.Fatal("a file larger than the cache evicted others or was kept")
	}
	c.retain(func(path string) bool { return path != "a" })
	if c.get("a", "") != nil || c.get("c", "") == nil || c.usedBytes() != c.get("c", "").bytes || testutil.ToFloat64(used) != float64(c.usedBytes()) {
		t.Fatalf("after dropping a: a cached %v, c %v, %d bytes used", c.get("a", "") != nil, c.get("c", "") != nil, c.usedBytes())
	}
}

// TestUpsertKeyIndex: an upsert indexes the keys of the files it scans,
// and those its commit adds (in the background); later upserts answered
// from the index give the same table as without one; a file holding a key
// twice is never indexed, and both of its rows are replaced.
func TestUpsertKeyIndex(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBytes int64
	}{{"indexed", DefaultKeyIndexMaxBytes}, {"no-index", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			cfg := upsertDVConfig(memURI(t))
			cfg.KeyIndexMaxBytes = tc.maxBytes
			w := openWriter(t, cfg, mem)
			cols := []string{"id", "str"}
			seedIDs(t, w, mem, [2]int32{0, 100})
			seedFile := snapshot(t, cfg).Files()[0].Path
			appender := openWriter(t, testConfig(cfg.TableURI, func(c *Config) { c.DeletionVectors = true }), mem)
			appendIDs(t, appender, mem, 7, 7, 200) // one file holding id 7 twice
			var dupFile string
			for _, a := range snapshot(t, cfg).Files() {
				if a.Path != seedFile {
					dupFile = a.Path
				}
			}
			rows := tableRows(t, cfg, cols)
			for epoch, changes := range [][]idChange{
				{{10, "a", "U"}, {7, "seven", "U"}, {300, "new", "I"}},
				{{11, "b", "U"}, {10, "a2", "U"}, {7, "", "D"}, {200, "", "D"}},
				{{12, "c", "U"}, {300, "", "D"}, {7, "back", "I"}, {99, "z", "U"}},
			} {
				rec := idBatch(mem, changes...)
				commitOne(t, w, writers.TxnKey{Writer: "idx", Epoch: int64(epoch + 1)}, rec)
				rec.Release()
				rows = applyIDs(rows, changes)
				sameRows(t, fmt.Sprintf("after upsert %d", epoch+1), tableRows(t, cfg, cols), rows)
			}
			if tc.maxBytes == 0 {
				if w.keys != nil {
					t.Fatal("key_index_max_bytes 0 built a key cache")
				}
				return
			}
			if w.keys.get(seedFile, "") == nil || w.keys.usedBytes() == 0 {
				t.Error("the seed file's keys were not indexed")
			}
			// The files of the last commit were indexed after it, in the
			// background (warmKeys), before any upsert read them.
			if err := w.waitWarm(context.Background()); err != nil {
				t.Fatal(err)
			}
			added := 0
			for _, a := range readCommit(t, cfg, snapshot(t, cfg).Version) {
				if a.Add != nil && a.Add.DeletionVector == nil {
					added++
					if w.keys.get(a.Add.Path, "") == nil {
						t.Errorf("file %s added by the last upsert was not indexed", a.Add.Path)
					}
				}
			}
			if added == 0 {
				t.Error("the last upsert added no file: the warm-up was not exercised")
			}
			if dupFile == "" || w.keys.get(dupFile, "") != nil {
				t.Errorf("the file holding id 7 twice (%q) was indexed", dupFile)
			}
		})
	}
}

// appendIDs appends rows with the given ids (str "appended") as one
// auto-commit stream of the append-mode writer w: one file.
func appendIDs(t *testing.T, w *Writer, mem memory.Allocator, ids ...int32) {
	t.Helper()
	b := array.NewRecordBuilder(mem, arrow.NewSchema(idSchema().Fields()[:2], nil))
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int32Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append("appended")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	commitOne(t, w, writers.AutoKey("append"), rec)
}

// TestKeyCacheLayout: a file's keys cached under one key layout are not
// found under another, and keys put under a new layout replace them.
func TestKeyCacheLayout(t *testing.T) {
	c := newKeyCache(1<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"}))
	keys := func(layout string) *fileKeys {
		return &fileKeys{path: "f", layout: layout, index: merge.NewKeyIndex(1), rows: 1}
	}
	c.put(keys(`"col-a"#1,`))
	if c.get("f", `"col-a"#1,`) == nil || c.get("f", `"col-b"#2,`) != nil {
		t.Fatal("lookup by layout: want a hit under the layout read, a miss under another")
	}
	c.put(keys(`"col-b"#2,`))
	if c.get("f", `"col-a"#1,`) != nil || c.get("f", `"col-b"#2,`) == nil || c.usedBytes() != c.get("f", `"col-b"#2,`).bytes {
		t.Fatal("keys under a new layout did not replace the old ones")
	}
}

// TestKeyCacheRowIDs: put keeps a file's entry with row ids over one read
// without them, replaces it when read under another id column, and
// charges the ids' capacity.
func TestKeyCacheRowIDs(t *testing.T) {
	c := newKeyCache(1<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"}))
	keys := func(idCol string, ids []int64) *fileKeys {
		return &fileKeys{path: "f", index: merge.NewKeyIndex(1), rows: 1, idCol: idCol, ids: ids}
	}
	withIDs := keys("_row-id-a", make([]int64, 1, 64))
	c.put(withIDs)
	if withIDs.bytes < 8*64 {
		t.Fatalf("entry charged %d bytes, less than its ids' capacity (%d)", withIDs.bytes, 8*64)
	}
	c.put(keys("", nil))
	if c.get("f", "") != withIDs {
		t.Fatal("an entry without row ids replaced one with them")
	}
	c.put(keys("_row-id-a", []int64{7}))
	if c.get("f", "") != withIDs {
		t.Fatal("the same file under the same id column replaced the cached entry")
	}
	other := keys("_row-id-b", []int64{7})
	c.put(other)
	if c.get("f", "") != other || c.usedBytes() != other.bytes {
		t.Fatal("an entry read under another id column did not replace the old one")
	}
}

// TestCachedMatchesIDColumn: an entry cached under another id column (or
// none) does not answer a row-tracked match; one under the table's does,
// with its ids.
func TestCachedMatchesIDColumn(t *testing.T) {
	key := binary.BigEndian.AppendUint64(nil, 1)
	idx := merge.NewKeyIndex(1)
	idx.Put(key, 0)
	set := merge.NewKeySet(1)
	set.Add(key)
	grp := &keyGroup{set: set}
	w := &Writer{keys: newKeyCache(1<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"}))}
	a := &deltalog.Add{Path: "f"}
	rt := &deltalayout.RowTracking{IDCol: "_row-id-a"}
	w.keys.put(&fileKeys{path: "f", index: idx, rows: 1, idCol: "_row-id-b", ids: []int64{42}})
	if _, _, ok := w.keys.matches(a, "", grp, nil, rt); ok {
		t.Fatal("an entry under another id column answered the match")
	}
	w.keys.put(&fileKeys{path: "f", index: idx, rows: 1, idCol: rt.IDCol, ids: []int64{42}})
	fm, _, ok := w.keys.matches(a, "", grp, nil, rt)
	if !ok || fm.len() != 1 || fm.ids[0] != 42 {
		t.Fatalf("entry under the table's id column: ok %v, matches %+v; want row 0 with id 42", ok, fm)
	}
}

// TestKeyLookupEitherSide: a cached file's matches are the same whether
// the file or the changelog has fewer keys (the lookup probes from the
// smaller side), in ascending file positions with their key ordinals and
// ids, and a changelog far larger than the file is answered from the cache.
func TestKeyLookupEitherSide(t *testing.T) {
	key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
	// The file holds keys 0, 3, 6, ... at positions 0, 1, 2, ...
	file := func(rows int) *fileKeys {
		x := merge.NewKeyIndex(rows)
		ids := make([]int64, rows)
		for pos := range rows {
			x.Put(key(3*pos), uint64(pos))
			ids[pos] = int64(1000 + pos)
		}
		return &fileKeys{path: "f", index: x, rows: int64(rows), idCol: "_row-id", ids: ids}
	}
	// The changelog holds keys n-1, n-2, ..., 0 (ordinal o is key n-1-o).
	source := func(n int) *merge.KeySet {
		s := merge.NewKeySet(n)
		for i := n - 1; i >= 0; i-- {
			s.Add(key(i))
		}
		return s
	}
	for _, tc := range []struct{ rows, keys int }{{10, 1000}, {1000, 10}, {50, 150}, {0, 5}, {5, 0}} {
		fk, set := file(tc.rows), source(tc.keys)
		fm := fk.lookup(set, nil, true)
		var want []int64
		for pos := range tc.rows {
			if 3*pos < tc.keys {
				want = append(want, int64(pos))
			}
		}
		if fm.len() != len(want) {
			t.Fatalf("%d rows, %d keys: %d matches, want %d", tc.rows, tc.keys, fm.len(), len(want))
		}
		for i, pos := range want {
			if fm.pos[i] != pos || int(fm.ord[i]) != tc.keys-1-3*int(pos) || fm.ids[i] != 1000+pos {
				t.Fatalf("%d rows, %d keys: match %d is (pos %d, ord %d, id %d), want (%d, %d, %d)",
					tc.rows, tc.keys, i, fm.pos[i], fm.ord[i], fm.ids[i], pos, tc.keys-1-3*int(pos), 1000+pos)
			}
		}
	}
	w := &Writer{keys: newKeyCache(1<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"}))}
	w.keys.put(file(10))
	if _, _, ok := w.keys.matches(&deltalog.Add{Path: "f"}, "", &keyGroup{set: source(1000)}, nil, &deltalayout.RowTracking{IDCol: "_row-id"}); !ok {
		t.Fatal("a changelog of 100 times the file's keys was not answered from the cache")
	}
}
