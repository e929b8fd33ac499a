package lance

import (
	"math"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
)

// indexPatch is what one merge changes in the key index, kept from its
// precommit for its commit: when the commit lands right on the version
// the index reflects, the index takes the merge's new row addresses
// directly (keyIndex.apply) instead of the next sync re-reading the new
// fragments' keys and scanning every indexed address for the deleted
// ones.
type indexPatch struct {
	readVersion uint64
	keys        *merge.KeySet // the source's keys
	// indexOrd is each source key's ordinal in the index's key set
	// indexed (-1: absent), as the plan looked them up.
	indexOrd []int32
	indexed  *merge.KeySet
	out      []int32    // key ordinal of each written row, in file order
	replaced []int32    // key ordinals whose target rows the merge deleted
	files    []fragment // the new data files, in order
	deletes  map[uint64][]uint32
}

// newIndexPatch records plan's effect on the index; nil when the index
// did not find the targets t or cannot take it (when_not_matched_by_source:
// delete deletes rows by keys outside the source).
func newIndexPatch(readVersion uint64, src *source, t *targets, plan *mergePlan, files []fragment, cfg *Config) *indexPatch {
	if t.indexed == nil || cfg.WhenNotMatchedBySource == "delete" {
		return nil
	}
	out := make([]int32, len(plan.out))
	for i, o := range plan.out {
		out[i] = o.ord
	}
	return &indexPatch{readVersion: readVersion, keys: src.keys, indexOrd: t.indexOrd, indexed: t.indexed,
		out: out, replaced: plan.replaced, files: files, deletes: plan.deletes}
}

// matches reports whether m is the merge p was recorded for.
func (p *indexPatch) matches(m *mergeDesc, frags []lancetable.Fragment) bool {
	if m.ReadVersion != p.readVersion || len(frags) != len(p.files) {
		return false
	}
	for i, f := range frags {
		if f.Files[0].Path != p.files[i].Path {
			return false
		}
	}
	return true
}

// apply brings the index from version p.readVersion to nd, the version
// the merge's commit made, and reports whether it did: only when the
// index reflects exactly p.readVersion with the key numbering the plan
// saw (no rebuild or compaction since) and nd follows it directly (no
// other writer committed in between). Otherwise the index is untouched
// and the next sync catches up by comparing fragments. A patched index
// larger than maxBytes (0: no bound) is emptied, so that the next sync
// rebuilds it and applies the bound.
func (x *keyIndex) apply(p *indexPatch, nd *lancetable.Dataset, maxBytes int) bool {
	if x.schema == nil || x.keys != p.indexed || x.version != p.readVersion || nd.Version() != p.readVersion+1 || !x.schema.Equal(&nd.Manifest.Schema) {
		return false
	}
	byPath := make(map[string]*lancetable.Fragment, len(p.files))
	byID := make(map[uint64]*lancetable.Fragment, len(nd.Manifest.Fragments))
	for i := range nd.Manifest.Fragments {
		f := &nd.Manifest.Fragments[i]
		byID[f.ID] = f
		if len(f.Files) == 1 {
			byPath[f.Files[0].Path] = f
		}
	}
	// The new address of every written row, grouped by key ordinal.
	first := make([]uint64, p.keys.Len())
	for i := range first {
		first[i] = noAddr
	}
	more := map[int32][]uint64{}
	row := 0
	for _, file := range p.files {
		f := byPath[file.Path]
		if f == nil || f.ID > maxIndexedFragment || f.PhysicalRows != file.Rows {
			return false
		}
		for off := range file.Rows {
			ord := p.out[row]
			row++
			if a := f.ID<<32 | off; first[ord] == noAddr {
				first[ord] = a
			} else {
				more[ord] = append(more[ord], a)
			}
		}
		x.frags[f.ID] = indexedFragment{seen: seenAs(f), live: file.Rows}
	}
	if row != len(p.out) {
		*x = *newKeyIndex() // the files do not hold the planned rows: rebuild
		return false
	}
	for _, ord := range p.replaced {
		if first[ord] == noAddr {
			x.set(p, ord, tombstone, nil)
		}
	}
	var fresh []int32 // keys new to the index, added at once below
	var freshVals []uint64
	for ord, a := range first {
		switch {
		case a == noAddr:
		case p.indexOrd[ord] < 0:
			fresh, freshVals = append(fresh, int32(ord)), append(freshVals, x.rowsValue(a, more[int32(ord)]))
		default:
			x.set(p, int32(ord), a, more[int32(ord)])
		}
	}
	x.addKeys(p.keys, fresh, freshVals)
	for id, offs := range p.deletes {
		e, ok := x.frags[id]
		f := byID[id]
		switch {
		case !ok:
		case f == nil:
			delete(x.frags, id)
		default:
			e.live -= uint64(len(offs))
			e.seen = seenAs(f)
			x.frags[id] = e
		}
	}
	x.version = nd.Version()
	if maxBytes > 0 && x.MemoryBytes() > maxBytes {
		*x = *newKeyIndex()
	}
	return true
}

// set makes first and more (first tombstone: none) the rows of source
// key ord of p, replacing what the index held for it: by the ordinal the
// plan found, without hashing the key again, or as a new key.
func (x *keyIndex) set(p *indexPatch, ord int32, first uint64, more []uint64) {
	v := x.rowsValue(first, more)
	old := uint64(tombstone) // a new key: as if it had been a tombstone
	if io := p.indexOrd[ord]; io >= 0 {
		old, x.vals[io] = x.vals[io], v
	} else {
		x.put(p.keys.Key(int(ord)), v)
		x.tombs++
	}
	if old&multiBit != 0 && old != tombstone {
		x.multi[old&^multiBit] = nil
	}
	switch {
	case old == tombstone && v != tombstone:
		x.tombs--
	case old != tombstone && v == tombstone:
		x.tombs++
	}
}

// rowsValue is the index value of a key whose rows are first and more.
func (x *keyIndex) rowsValue(first uint64, more []uint64) uint64 {
	if len(more) == 0 {
		return first
	}
	x.multi = append(x.multi, append([]uint64{first}, more...))
	return multiBit | uint64(len(x.multi)-1)
}

// addKeys adds the keys ords of keys, new to the index, with values vals
// (rows, not tombstones). Keys of 8 bytes (one int64 or timestamp key
// column, the usual merge key) are added in one KeySet.AddInt64s, whose
// dense table takes a merge's new ids without hashing; others one by
// one.
func (x *keyIndex) addKeys(keys *merge.KeySet, ords []int32, vals []uint64) {
	if len(ords) == 0 {
		return
	}
	if int64(x.keys.Len())+int64(len(ords)) > math.MaxInt32 || !allWidth(keys, ords, 8) {
		for i, ord := range ords {
			x.put(keys.Key(int(ord)), vals[i])
		}
		return
	}
	xs := make([]int64, len(ords))
	for i, ord := range ords {
		xs[i] = merge.KeyInt64(keys.Key(int(ord)))
	}
	for i, io := range x.keys.AddInt64s(xs, make([]int32, 0, len(xs))) {
		if int(io) == len(x.vals) {
			x.vals = append(x.vals, vals[i])
		} else {
			x.vals[io] = vals[i] // as put does: a key the plan did not find
		}
	}
}

// allWidth reports whether the keys ords of keys are all width bytes.
func allWidth(keys *merge.KeySet, ords []int32, width int) bool {
	for _, ord := range ords {
		if len(keys.Key(int(ord))) != width {
			return false
		}
	}
	return true
}
