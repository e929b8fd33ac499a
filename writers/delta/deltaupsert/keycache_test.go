package deltaupsert

import (
	"encoding/binary"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// TestKeyCacheEvictsLeastRecentlyUsed: the cache stays within its bytes,
// dropping the file used longest ago, never keeps a file larger than
// itself, and drops files no longer live on demand.
func TestKeyCacheEvictsLeastRecentlyUsed(t *testing.T) {
	file := func(path string, keys int) *FileKeys {
		x := merge.NewKeyIndex(keys)
		for i := range keys {
			x.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), uint64(i))
		}
		return &FileKeys{path: path, index: x, rows: int64(keys)}
	}
	one := file("a", 1000)
	size := one.index.MemoryBytes() + 1
	used := prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"})
	c := NewKeyCache(int64(2*size+10), used)
	c.Put(one)
	c.Put(file("b", 1000))
	c.Get("a", "") // a is now the most recently used
	c.Put(file("c", 1000))
	if c.Get("b", "") != nil || c.Get("a", "") == nil || c.Get("c", "") == nil {
		t.Fatalf("after a third file: b cached %v, a %v, c %v; want b evicted", c.Get("b", "") != nil, c.Get("a", "") != nil, c.Get("c", "") != nil)
	}
	if c.UsedBytes() > 2*size+10 || testutil.ToFloat64(used) != float64(c.UsedBytes()) {
		t.Fatalf("cache holds %d bytes (gauge %v), more than its %d or not reported", c.UsedBytes(), testutil.ToFloat64(used), 2*size+10)
	}
	c.Put(file("huge", 100_000))
	if c.Get("huge", "") != nil || c.Get("a", "") == nil {
		t.Fatal("a file larger than the cache evicted others or was kept")
	}
	c.Retain(func(path string) bool { return path != "a" })
	if c.Get("a", "") != nil || c.Get("c", "") == nil || c.UsedBytes() != c.Get("c", "").bytes || testutil.ToFloat64(used) != float64(c.UsedBytes()) {
		t.Fatalf("after dropping a: a cached %v, c %v, %d bytes used", c.Get("a", "") != nil, c.Get("c", "") != nil, c.UsedBytes())
	}
}

// TestKeyCacheLayout: a file's keys cached under one key layout are not
// found under another, and keys put under a new layout replace them.
func TestKeyCacheLayout(t *testing.T) {
	c := NewKeyCache(1<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"}))
	keys := func(layout string) *FileKeys {
		return &FileKeys{path: "f", layout: layout, index: merge.NewKeyIndex(1), rows: 1}
	}
	c.Put(keys(`"col-a"#1,`))
	if c.Get("f", `"col-a"#1,`) == nil || c.Get("f", `"col-b"#2,`) != nil {
		t.Fatal("lookup by layout: want a hit under the layout read, a miss under another")
	}
	c.Put(keys(`"col-b"#2,`))
	if c.Get("f", `"col-a"#1,`) != nil || c.Get("f", `"col-b"#2,`) == nil || c.UsedBytes() != c.Get("f", `"col-b"#2,`).bytes {
		t.Fatal("keys under a new layout did not replace the old ones")
	}
}

// TestKeyCacheRowIDs: put keeps a file's entry with row ids over one read
// without them, replaces it when read under another id column, and
// charges the ids' capacity.
func TestKeyCacheRowIDs(t *testing.T) {
	c := NewKeyCache(1<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"}))
	keys := func(idCol string, ids []int64) *FileKeys {
		return &FileKeys{path: "f", index: merge.NewKeyIndex(1), rows: 1, IDCol: idCol, IDs: ids}
	}
	withIDs := keys("_row-id-a", make([]int64, 1, 64))
	c.Put(withIDs)
	if withIDs.bytes < 8*64 {
		t.Fatalf("entry charged %d bytes, less than its ids' capacity (%d)", withIDs.bytes, 8*64)
	}
	c.Put(keys("", nil))
	if c.Get("f", "") != withIDs {
		t.Fatal("an entry without row ids replaced one with them")
	}
	c.Put(keys("_row-id-a", []int64{7}))
	if c.Get("f", "") != withIDs {
		t.Fatal("the same file under the same id column replaced the cached entry")
	}
	other := keys("_row-id-b", []int64{7})
	c.Put(other)
	if c.Get("f", "") != other || c.UsedBytes() != other.bytes {
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
	grp := &KeyGroup{set: set}
	c := NewKeyCache(1<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"}))
	a := &deltalog.Add{Path: "f"}
	rt := &deltalayout.RowTracking{IDCol: "_row-id-a"}
	c.Put(&FileKeys{path: "f", index: idx, rows: 1, IDCol: "_row-id-b", IDs: []int64{42}})
	if _, _, ok := c.Matches(a, "", grp, nil, rt); ok {
		t.Fatal("an entry under another id column answered the match")
	}
	c.Put(&FileKeys{path: "f", index: idx, rows: 1, IDCol: rt.IDCol, IDs: []int64{42}})
	fm, _, ok := c.Matches(a, "", grp, nil, rt)
	if !ok || fm.Len() != 1 || fm.ids[0] != 42 {
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
	file := func(rows int) *FileKeys {
		x := merge.NewKeyIndex(rows)
		ids := make([]int64, rows)
		for pos := range rows {
			x.Put(key(3*pos), uint64(pos))
			ids[pos] = int64(1000 + pos)
		}
		return &FileKeys{path: "f", index: x, rows: int64(rows), IDCol: "_row-id", IDs: ids}
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
		if fm.Len() != len(want) {
			t.Fatalf("%d rows, %d keys: %d matches, want %d", tc.rows, tc.keys, fm.Len(), len(want))
		}
		for i, pos := range want {
			if fm.Pos[i] != pos || int(fm.ord[i]) != tc.keys-1-3*int(pos) || fm.ids[i] != 1000+pos {
				t.Fatalf("%d rows, %d keys: match %d is (pos %d, ord %d, id %d), want (%d, %d, %d)",
					tc.rows, tc.keys, i, fm.Pos[i], fm.ord[i], fm.ids[i], pos, tc.keys-1-3*int(pos), 1000+pos)
			}
		}
	}
	c := NewKeyCache(1<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"}))
	c.Put(file(10))
	if _, _, ok := c.Matches(&deltalog.Add{Path: "f"}, "", &KeyGroup{set: source(1000)}, nil, &deltalayout.RowTracking{IDCol: "_row-id"}); !ok {
		t.Fatal("a changelog of 100 times the file's keys was not answered from the cache")
	}
}
