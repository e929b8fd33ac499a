package deltaupsert

import (
	"cmp"
	"container/list"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/merge"
)

// KeyCache keeps, for data files an upsert scanned, the index of their
// merge-key values to row positions, so that later upserts look their
// source keys up instead of reading and probing every key of the file.
// Data files never change once written (a deletion vector is applied on
// top, by position) and Delta writers never reuse a path (file names carry
// a random UUID), so an entry is keyed by the file's path and dropped to
// stay within maxBytes, least recently used first, or once its file is no
// longer live (Retain). What the key columns of a file are can change,
// though: with column mapping, a rename or a drop and add (ALTER TABLE)
// gives a key column's name another physical column. An entry therefore
// records the key layout it was read under (ColumnMap.KeyLayout), and a
// lookup under another layout misses. Safe for concurrent use.
type KeyCache struct {
	maxBytes int
	gauge    prometheus.Gauge // the bytes used, for operators

	mu    sync.Mutex
	used  int
	files map[string]*list.Element // of *FileKeys
	lru   list.List                // front: most recently used
}

// FileKeys is one data file's key index: encoded key → row position.
// Files holding a key twice are never cached (one position per key). In a
// table that tracks rows it also holds the file's materialized row ids,
// as the key match needs them (upsertmatch.go).
type FileKeys struct {
	path   string
	layout string            // the physical key columns read (deltalayout.ColumnMap.KeyLayout)
	enc    *merge.KeyEncoder // the file's encoder, for SameEncoding with a source; nil: no key column (index empty)
	index  *merge.KeyIndex
	rows   int64 // rows in the file, marked deleted or not
	// IDCol names the materialized row id column read with the keys (""
	// when none was); IDs are its values by position (noRowID: null), nil
	// when the file lacks the column or it is all null.
	IDCol string
	IDs   []int64
	bytes int
}

// NewKeyCache returns an empty cache of maxBytes, reporting the bytes it
// uses to gauge.
func NewKeyCache(maxBytes int64, gauge prometheus.Gauge) *KeyCache {
	return &KeyCache{maxBytes: int(maxBytes), gauge: gauge, files: map[string]*list.Element{}}
}

// Get returns the keys of the file at path read under key layout
// layout, nil when not cached (or under another layout).
func (c *KeyCache) Get(path, layout string) *FileKeys {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.files[path]
	if e == nil || e.Value.(*FileKeys).layout != layout {
		return nil
	}
	c.lru.MoveToFront(e)
	return e.Value.(*FileKeys)
}

// Put caches fk, in place of the file's keys under another layout or
// read without its row ids, evicting the least recently used files to
// make room; a file larger than the whole cache is not kept.
func (c *KeyCache) Put(fk *FileKeys) {
	fk.bytes = fk.index.MemoryBytes() + len(fk.path) + len(fk.layout) + 8*cap(fk.IDs)
	if fk.bytes > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.files[fk.path]; e != nil {
		old := e.Value.(*FileKeys)
		if old.layout == fk.layout && (old.IDCol == fk.IDCol || fk.IDCol == "") {
			return // cached concurrently, or with more: the same file's keys
		}
		c.lru.Remove(e)
		delete(c.files, fk.path)
		c.used -= old.bytes
	}
	for c.used+fk.bytes > c.maxBytes {
		last := c.lru.Back()
		old := c.lru.Remove(last).(*FileKeys)
		delete(c.files, old.path)
		c.used -= old.bytes
	}
	c.files[fk.path] = c.lru.PushFront(fk)
	c.used += fk.bytes
	c.gauge.Set(float64(c.used))
}

// Retain drops the files for which live is false: files a commit removed
// are never read again, so their indexes would only hold memory until
// evicted.
func (c *KeyCache) Retain(live func(path string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for path, e := range c.files {
		if !live(path) {
			c.used -= c.lru.Remove(e).(*FileKeys).bytes
			delete(c.files, path)
		}
	}
	c.gauge.Set(float64(c.used))
}

// MaxBytes is the cache's size: no file's keys larger than it are kept.
func (c *KeyCache) MaxBytes() int { return c.maxBytes }

// UsedBytes returns the memory the cached indexes hold.
func (c *KeyCache) UsedBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// lookup returns the rows of the file whose keys are in set (ascending
// positions), with their ids (withIDs) for a file of baseRowId base. It
// probes from the smaller side: the set's keys in the file's index, or
// the file's keys in the set (a small file against a large changelog).
func (fk *FileKeys) lookup(set *merge.KeySet, base *int64, withIDs bool) FileMatches {
	type hit struct {
		pos int64
		ord int32
	}
	var hits []hit
	if file := fk.index.Keys(); file.Len() < set.Len() {
		for i := range file.Len() {
			if ord, ok := set.Find(file.Key(i)); ok {
				hits = append(hits, hit{int64(fk.index.Value(i)), int32(ord)})
			}
		}
	} else {
		for ord := range set.Len() {
			if pos, ok := fk.index.Get(set.Key(ord)); ok {
				hits = append(hits, hit{int64(pos), int32(ord)})
			}
		}
	}
	slices.SortFunc(hits, func(a, b hit) int { return cmp.Compare(a.pos, b.pos) })
	fm := FileMatches{Pos: make([]int64, 0, len(hits)), ord: make([]int32, 0, len(hits))}
	for _, h := range hits {
		mat := int64(noRowID)
		if fk.IDs != nil {
			mat = fk.IDs[h.pos]
		}
		fm.add(h.pos, h.ord, rowID(mat, base, h.pos), withIDs)
	}
	return fm
}
