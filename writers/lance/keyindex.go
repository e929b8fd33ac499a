package lance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// Values of the key index: a row address (fragment id << 32 | offset), a
// tombstone (the key's rows were all deleted), or multiBit | i for a key
// the target holds more than once (its addresses are multi[i]).
const (
	tombstone = math.MaxUint64
	multiBit  = 1 << 63
	// maxIndexedFragment keeps fragment ids clear of multiBit; a dataset
	// with larger ids is merged by scanning.
	maxIndexedFragment = 1<<31 - 1
)

// errNoIndex is why a dataset cannot be indexed: the index outgrew
// key_index_max_bytes, or a fragment id does not fit its addresses. The
// endpoint then merges by scanning.
var errNoIndex = errors.New("lance: the key index cannot hold this dataset")

// keyIndex maps the key of every live row of one dataset version to its
// row address, so a merge finds its targets without reading the dataset.
// It is synced to the latest version before each merge (see sync): the
// fragments that changed since it was built — by Quiver's own commits or
// another writer's — are read again (only their key columns), the others
// are not touched. Not safe for concurrent use: the Writer serializes it.
type keyIndex struct {
	// keys numbers the indexed keys; vals[ord] is the value of key ord.
	// (A merge.KeyIndex, opened up: a merge's commit sets the values of
	// the keys its plan looked up by ordinal, without hashing them again.)
	keys  *merge.KeySet
	vals  []uint64
	multi [][]uint64
	tombs int // tombstoned keys (they keep their slot)
	// frags is each indexed fragment as the index saw it, with its count
	// of indexed addresses.
	frags  map[uint64]indexedFragment
	schema *lancefile.Schema
	enc    *merge.KeyEncoder
	// version is the dataset version the index reflects (0: none).
	version uint64
}

type indexedFragment struct {
	seen touchedFragment
	live uint64
}

// syncStats says what one sync did.
type syncStats struct {
	rebuilt bool // the index was built from scratch
	changed int  // fragments re-read or patched with their new deletions
}

func newKeyIndex() *keyIndex {
	return newKeyIndexSized(0)
}

// newKeyIndexSized returns an empty index sized for about n keys (at most
// merge.MaxSizeHint: n comes from a manifest's row count, another
// process's claim).
func newKeyIndexSized(n int) *keyIndex {
	n = min(max(n, 0), merge.MaxSizeHint)
	return &keyIndex{keys: merge.NewKeySet(n), vals: make([]uint64, 0, n), frags: map[uint64]indexedFragment{}}
}

// rebuiltSize is the size of an index built for a dataset of rows rows:
// those and a quarter more (within merge.MaxSizeHint), so that the keys the
// next merges insert land without copying the index's arrays. (Growing a
// 2M-key index by copying took 60-90 ms, most of it faulting in the new
// arrays' pages, while the next merge waited.)
func rebuiltSize(rows uint64) int {
	n := min(rows, merge.MaxSizeHint*4/5)
	return int(n + n/4)
}

// put sets the value of key (borrowed) and returns its ordinal, the
// previous value and whether there was one.
func (x *keyIndex) put(key []byte, v uint64) (ord int, old uint64, replaced bool) {
	ord, added := x.keys.Add(key)
	if added {
		x.vals = append(x.vals, v)
		return ord, 0, false
	}
	old, x.vals[ord] = x.vals[ord], v
	return ord, old, true
}

// get returns the ordinal and value of key, or false.
func (x *keyIndex) get(key []byte) (ord int, v uint64, ok bool) {
	ord, ok = x.keys.Find(key)
	if !ok {
		return -1, 0, false
	}
	return ord, x.vals[ord], true
}

// Len returns the number of indexed keys (tombstones excluded).
func (x *keyIndex) Len() int { return x.keys.Len() - x.tombs }

// MemoryBytes returns the bytes the index holds.
func (x *keyIndex) MemoryBytes() int {
	n := x.keys.MemoryBytes() + 8*cap(x.vals) + 24*cap(x.multi)
	for _, m := range x.multi {
		n += 8 * cap(m)
	}
	return n
}

// cold reports whether syncing the index to d would build it from
// scratch: it reflects no version (new, or emptied after a failure) or
// another key schema.
func (x *keyIndex) cold(d *lancetable.Dataset) bool {
	return d != nil && (x.version == 0 || x.schema == nil || !x.schema.Equal(&d.Manifest.Schema))
}

// sync brings the index to version d (nil: no dataset), reading only what
// changed since the version it reflects: fragments that are new or whose
// data files changed are re-read; a fragment with only a new deletion file
// loses the newly deleted addresses (re-read if rows came back). It
// rebuilds from scratch when the key schema changed. It returns an error
// wrapping errNoIndex past maxBytes (0: no bound); on any error the index
// is left empty (the next sync rebuilds it).
func (x *keyIndex) sync(ctx context.Context, b *storage.Bucket, d *lancetable.Dataset, on []string, maxBytes int, mem memory.Allocator) (syncStats, error) {
	var st syncStats
	if d == nil {
		*x = *newKeyIndex()
		return st, nil
	}
	if x.schema == nil || !x.schema.Equal(&d.Manifest.Schema) {
		as, err := d.Manifest.Schema.ToArrow()
		if err != nil {
			return st, err
		}
		enc, err := merge.NewKeyEncoder(as, on)
		if err != nil {
			return st, err
		}
		*x = *newKeyIndexSized(rebuiltSize(d.Manifest.NumRows()))
		x.schema, x.enc = &d.Manifest.Schema, enc
		st.rebuilt = true
	}
	current := make(map[uint64]*lancetable.Fragment, len(d.Manifest.Fragments))
	var read []*lancetable.Fragment               // new or rewritten: read whole
	var purged, deleted []uint64                  // fragments losing all / some addresses
	drop := newDropSet(len(d.Manifest.Fragments)) // the addresses they lose
	for i := range d.Manifest.Fragments {
		f := &d.Manifest.Fragments[i]
		if f.ID > maxIndexedFragment {
			return st, x.fail(fmt.Errorf("%w: fragment id %d does not fit a row address", errNoIndex, f.ID))
		}
		current[f.ID] = f
		old, ok := x.frags[f.ID]
		switch {
		case !ok:
			read = append(read, f)
		case unchanged(f, old.seen):
		case sameFiles(f, old.seen):
			offs, err := lancetable.ReadDeletions(ctx, b, f)
			if err != nil {
				return st, x.fail(err)
			}
			drop.addOffsets(f.ID, offs)
			deleted = append(deleted, f.ID)
		default:
			drop.addFragment(f.ID)
			purged = append(purged, f.ID)
			read = append(read, f)
		}
	}
	for id := range x.frags {
		if current[id] == nil {
			drop.addFragment(id)
			purged = append(purged, id)
		}
	}
	if !drop.empty() {
		x.remove(drop.has)
		// Rows that came back (a restore) are not in the index: re-read.
		back := newDropSet(len(d.Manifest.Fragments))
		for _, id := range deleted {
			f := current[id]
			if x.frags[id].live != f.LiveRows() {
				back.addFragment(id)
				read = append(read, f)
			}
		}
		if !back.empty() {
			x.remove(back.has)
		}
		for _, id := range purged {
			delete(x.frags, id)
		}
		for _, id := range deleted {
			e := x.frags[id]
			e.seen = seenAs(current[id])
			x.frags[id] = e
		}
	}
	if x.tombs > x.Len() && x.tombs > minCompact {
		x.compact()
	}
	reads, stop := readAhead(ctx, b, d, read, on, mem)
	defer stop()
	for _, f := range read {
		r, ok := <-reads
		if ok && r.err == nil && ctx.Err() != nil {
			// Read, but the sync was cancelled meanwhile: the reader's
			// send and its cancellation race, the sync fails either way.
			lancefile.ReleaseRecords(r.recs)
			ok = false
		}
		if !ok { // cancelled before it read f
			r.err = fmt.Errorf("lance: read the key columns of fragment %d: %w", f.ID, context.Cause(ctx))
		}
		if r.err != nil {
			return st, x.fail(r.err)
		}
		err := x.indexFragment(f, r.recs, r.gone)
		lancefile.ReleaseRecords(r.recs)
		if err != nil {
			return st, x.fail(err)
		}
		if maxBytes > 0 && x.MemoryBytes() > maxBytes {
			return st, x.fail(fmt.Errorf("%w: it outgrew key_index_max_bytes (%d)", errNoIndex, maxBytes))
		}
	}
	st.changed = len(read) + len(purged) + len(deleted)
	x.version = d.Version()
	return st, nil
}

// minCompact is the fewest tombstones worth compacting away.
const minCompact = 1 << 16

// compact rebuilds the key table without its tombstones (in memory: the
// addresses are all there).
func (x *keyIndex) compact() {
	ks, vals := x.keys, x.vals
	x.keys, x.vals = merge.NewKeySet(x.Len()), make([]uint64, 0, x.Len())
	x.tombs = 0
	for ord, v := range vals {
		if v != tombstone {
			x.put(ks.Key(ord), v)
		}
	}
}

// fail empties the index (it may be half-synced) and returns err.
func (x *keyIndex) fail(err error) error {
	*x = *newKeyIndex()
	return err
}

// sameFiles reports whether f still has the data files t recorded.
func sameFiles(f *lancetable.Fragment, t touchedFragment) bool {
	return unchanged(f, touchedFragment{ID: t.ID, Files: t.Files, Deletion: f.Deletion})
}

// seenAs records f's data files and deletion file.
func seenAs(f *lancetable.Fragment) touchedFragment {
	t := touchedFragment{ID: f.ID}
	for _, df := range f.Files {
		t.Files = append(t.Files, df.Path)
	}
	if f.Deletion != nil {
		del := *f.Deletion
		t.Deletion = &del
	}
	return t
}

// fragmentRead is a fragment's key columns and deleted offsets.
type fragmentRead struct {
	recs []arrow.RecordBatch
	gone droppedFragment
	err  error
}

// readAhead reads the key columns (and deletion files) of frags, in
// order, on a goroutine of its own one fragment ahead of the caller, who
// indexes one fragment while the next is read and decoded. stop ends it
// and releases what was read and not received.
func readAhead(ctx context.Context, b *storage.Bucket, d *lancetable.Dataset, frags []*lancetable.Fragment, on []string, mem memory.Allocator) (<-chan fragmentRead, func()) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan fragmentRead, 1)
	go func() {
		defer close(out)
		for _, f := range frags {
			var r fragmentRead
			// Guarded: this goroutine is the sink's; a panic (a file
			// it cannot decode) fails the sync.
			r.err = writers.Guard(func() error {
				var err error
				if r.gone, err = deletedOffsets(ctx, b, f); err == nil {
					r.recs, err = d.ReadColumns(ctx, b, f, on, mem)
				}
				return err
			})()
			select {
			case out <- r:
			case <-ctx.Done():
				lancefile.ReleaseRecords(r.recs)
				return
			}
			if r.err != nil {
				return
			}
		}
	}()
	return out, func() {
		cancel()
		for r := range out {
			lancefile.ReleaseRecords(r.recs)
		}
	}
}

// indexFragment indexes the live rows of f, whose key columns are recs
// (borrowed) and deleted offsets gone.
func (x *keyIndex) indexFragment(f *lancetable.Fragment, recs []arrow.RecordBatch, gone droppedFragment) error {
	var live uint64
	rows := lancefile.Rows(recs)
	gone = gone.forRows(rows)
	if loneInt64(recs) && int64(x.keys.Len())+rows <= math.MaxInt32 { // AddInt64s' bound
		live = x.addInt64s(recs, f.ID, gone)
	} else {
		err := recordKeys(recs, x.enc, func(off uint32, key []byte) {
			if !gone.inBits(off) {
				x.add(key, f.ID<<32|uint64(off))
				live++
			}
		})
		if err != nil {
			return err
		}
	}
	x.frags[f.ID] = indexedFragment{seen: seenAs(f), live: live}
	return nil
}

// addInt64s indexes the live rows of fragment id whose keys are recs'
// lone int64 column (see loneInt64), with no key encoded per row
// (KeySet.AddInt64s), and returns how many it indexed; gone has no sparse
// part (droppedFragment.forRows).
func (x *keyIndex) addInt64s(recs []arrow.RecordBatch, id uint64, gone droppedFragment) (live uint64) {
	var kept []int64       // the live values, when some rows are gone
	var offs, ords []int32 // offs: the offset of each of kept
	var at uint32          // the fragment offset of the record's first row
	filter := !gone.none()
	for _, rec := range recs {
		vals := rec.Column(0).(*array.Int64).Int64Values()
		xs := vals
		if filter {
			kept, offs = kept[:0], offs[:0]
			for i, v := range vals {
				if off := at + uint32(i); !gone.inBits(off) {
					kept, offs = append(kept, v), append(offs, int32(off))
				}
			}
			xs = kept
		}
		ords = x.keys.AddInt64s(xs, ords[:0])
		for i, ord := range ords {
			off := at + uint32(i)
			if filter {
				off = uint32(offs[i])
			}
			x.addRow(int(ord), id<<32|uint64(off))
		}
		live += uint64(len(xs))
		at += uint32(len(vals))
	}
	return live
}

// loneInt64 reports whether recs hold one int64 column without nulls: a
// lone int64 key, which KeySet.AddInt64s and KeyMatcher.FindInt64 take as
// values.
func loneInt64(recs []arrow.RecordBatch) bool {
	for _, rec := range recs {
		if rec.NumCols() != 1 || rec.Column(0).DataType().ID() != arrow.INT64 || rec.Column(0).NullN() > 0 {
			return false
		}
	}
	return true
}

// add records one more live row of key (borrowed) at addr.
func (x *keyIndex) add(key []byte, addr uint64) {
	ord, _ := x.keys.Add(key)
	x.addRow(ord, addr)
}

// addRow records one more live row, at addr, of the key of ordinal ord in
// x.keys (a new key when ord is the next ordinal: its first row).
func (x *keyIndex) addRow(ord int, addr uint64) {
	if ord == len(x.vals) {
		x.vals = append(x.vals, addr)
		return
	}
	old := x.vals[ord]
	x.vals[ord] = addr
	switch {
	case old == tombstone:
		x.tombs--
	case old&multiBit != 0:
		i := old &^ multiBit
		x.multi[i] = append(x.multi[i], addr)
		x.vals[ord] = old
	default:
		x.multi = append(x.multi, []uint64{old, addr})
		x.vals[ord] = multiBit | uint64(len(x.multi)-1)
	}
}

// remove drops every indexed address gone reports, in one pass.
func (x *keyIndex) remove(gone func(addr uint64) bool) {
	for ord, v := range x.vals {
		switch {
		case v == tombstone:
		case v&multiBit != 0:
			i := v &^ multiBit
			kept := x.multi[i][:0]
			for _, a := range x.multi[i] {
				if gone(a) {
					x.dropped(a)
				} else {
					kept = append(kept, a)
				}
			}
			switch len(kept) {
			case 0:
				x.multi[i] = nil
				x.vals[ord] = tombstone
				x.tombs++
			case 1:
				x.multi[i] = nil
				x.vals[ord] = kept[0]
			default:
				x.multi[i] = kept
			}
		case gone(v):
			x.dropped(v)
			x.vals[ord] = tombstone
			x.tombs++
		}
	}
}

// parallelLookups is the fewest source keys worth looking up on several
// cores.
const parallelLookups = 1 << 15

// lookup finds every key of keys in the index: it returns each key's
// value (noAddr when absent) and sets indexOrd[ord] to its ordinal (-1
// when absent). Large key sets are looked up on all cores in parallel
// (the lookups only read the index, and each is a cache miss or two); a
// panic on one of those goroutines, which gRPC's recovery does not cover,
// is returned as the error.
func (x *keyIndex) lookup(keys *merge.KeySet, indexOrd []int32) ([]uint64, error) {
	found := make([]uint64, keys.Len())
	find := func(from, to int) {
		for ord := from; ord < to; ord++ {
			io, v, ok := x.get(keys.Key(ord))
			if !ok {
				v = noAddr
			}
			found[ord], indexOrd[ord] = v, int32(io)
		}
	}
	parts := min(runtime.GOMAXPROCS(0), keys.Len()/parallelLookups)
	if parts <= 1 {
		find(0, keys.Len())
		return found, nil
	}
	var wg sync.WaitGroup
	step := (keys.Len() + parts - 1) / parts
	errs := make([]error, parts)
	for i := range parts {
		from := i * step
		wg.Go(func() {
			defer writers.Recover(&errs[i])
			find(from, min(from+step, keys.Len()))
		})
	}
	wg.Wait()
	return found, errors.Join(errs...)
}

// dropped counts addr out of its fragment's indexed rows.
func (x *keyIndex) dropped(addr uint64) {
	if e, ok := x.frags[addr>>32]; ok {
		e.live--
		x.frags[addr>>32] = e
	}
}

// targets returns the matches of src's keys and, with bySource, adds the
// addresses of indexed keys the source lacks to plan.deletes: what
// scanTargets returns for the version the index reflects. It also
// records the index ordinal of every source key found (see indexPatch).
func (x *keyIndex) targets(src *source, bySource bool, plan *mergePlan) (*targets, error) {
	t := newTargets(src.keys.Len())
	t.indexed, t.indexOrd = x.keys, make([]int32, src.keys.Len())
	expand := func(v uint64, each func(uint64)) {
		switch {
		case v == tombstone:
		case v&multiBit != 0:
			for _, a := range x.multi[v&^multiBit] {
				each(a)
			}
		default:
			each(v)
		}
	}
	found, err := x.lookup(src.keys, t.indexOrd)
	if err != nil {
		return nil, fmt.Errorf("lance: look up the source keys in the key index: %w", err)
	}
	for ord, v := range found {
		if v != noAddr {
			expand(v, func(a uint64) { t.add(int32(ord), a) })
		}
	}
	if bySource {
		match := merge.NewKeyMatcher(src.keys)
		for ord, v := range x.vals {
			if match.Contains(x.keys.Key(ord)) {
				continue
			}
			expand(v, func(a uint64) {
				plan.deletes[a>>32] = append(plan.deletes[a>>32], uint32(a))
				plan.counts.Deleted++
			})
		}
	}
	return t, nil
}
