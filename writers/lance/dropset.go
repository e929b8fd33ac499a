package lance

import (
	"context"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// dropSet is a set of row addresses (fragment id << 32 | offset) held as
// whole fragments or per-fragment offsets (droppedFragment). A key index
// sync tests every indexed address, so a test costs two slice loads: the
// fragments are kept in a slice indexed by id while the ids stay below
// slotted (a bound the sync derives from the manifest's fragment count,
// which its own bytes pay for), and in a map beyond it: fragment ids come
// from manifests other processes wrote, and nothing is sized by one.
type dropSet struct {
	slotted uint64 // ids below it live in slots
	slots   []*droppedFragment
	far     map[uint64]*droppedFragment
}

// newDropSet returns an empty set for a dataset of fragments fragments.
func newDropSet(fragments int) dropSet {
	return dropSet{slotted: uint64(4*fragments + 1024)}
}

// droppedFragment is a fragment's deleted offsets: every one, or a bitset,
// or a roaring bitmap when the offsets are too spread for a bitset of
// bounded size (they go up to the fragment's claimed rows, another
// process's word: a bitset sized by the largest offset could take 512 MiB
// for one fragment).
type droppedFragment struct {
	all    bool            // every offset (bits and sparse are then nil)
	bits   []uint64        // else these offsets,
	sparse *roaring.Bitmap // and these (all at or past the bitset's end)
}

// maxBitsetWords bounds a fragment's bitset when it holds fewer offsets
// than words: 128 KiB, the rows of a default Lance fragment (1Mi).
const maxBitsetWords = 1 << 14

// deletedOffsets returns the offsets fragment f's deletion file deletes.
func deletedOffsets(ctx context.Context, b *storage.Bucket, f *lancetable.Fragment) (droppedFragment, error) {
	var gone droppedFragment
	offs, err := lancetable.ReadDeletions(ctx, b, f)
	gone.add(offs)
	return gone, err
}

// add adds offs to the fragment's offsets.
func (f *droppedFragment) add(offs []uint32) {
	if len(offs) == 0 || f.all {
		return
	}
	// A bitset of at most maxBitsetWords, or 8 bytes per offset added.
	if words := int(slices.Max(offs)/64) + 1; f.sparse == nil && words <= max(maxBitsetWords, len(f.bits), len(offs)) {
		if words > len(f.bits) {
			f.bits = append(f.bits, make([]uint64, words-len(f.bits))...)
		}
		for _, o := range offs {
			f.bits[o/64] |= 1 << (o % 64)
		}
		return
	}
	if f.sparse == nil {
		f.sparse = roaring.New()
	}
	for _, o := range offs {
		if w := int(o / 64); w < len(f.bits) {
			f.bits[w] |= 1 << (o % 64)
		} else {
			f.sparse.Add(o)
		}
	}
}

// fragment returns id's entry, adding an empty one.
func (s *dropSet) fragment(id uint64) *droppedFragment {
	if id < s.slotted {
		if id >= uint64(len(s.slots)) {
			s.slots = append(s.slots, make([]*droppedFragment, id+1-uint64(len(s.slots)))...)
		}
		if s.slots[id] == nil {
			s.slots[id] = &droppedFragment{}
		}
		return s.slots[id]
	}
	if s.far == nil {
		s.far = map[uint64]*droppedFragment{}
	}
	f := s.far[id]
	if f == nil {
		f = &droppedFragment{}
		s.far[id] = f
	}
	return f
}

// addFragment adds every address of fragment id.
func (s *dropSet) addFragment(id uint64) { *s.fragment(id) = droppedFragment{all: true} }

// addOffsets adds the offsets offs of fragment id.
func (s *dropSet) addOffsets(id uint64, offs []uint32) { s.fragment(id).add(offs) }

// has reports whether addr is in the set.
func (s *dropSet) has(addr uint64) bool {
	id := addr >> 32
	if id < uint64(len(s.slots)) {
		f := s.slots[id]
		return f != nil && f.has(uint32(addr))
	}
	f := s.far[id]
	return f != nil && f.has(uint32(addr))
}

// none reports whether the fragment loses no offset.
func (f *droppedFragment) none() bool { return !f.all && len(f.bits) == 0 && f.sparse == nil }

// has reports whether offset off of the fragment is in the set.
func (f *droppedFragment) has(off uint32) bool {
	return f.inBits(off) || f.sparse != nil && f.sparse.Contains(off)
}

// inBits is has for a fragment without a sparse part (forRows makes
// one): small enough to inline in the scans that test every row.
func (f *droppedFragment) inBits(off uint32) bool {
	if f.all {
		return true
	}
	w := int(off / 64)
	return w < len(f.bits) && f.bits[w]&(1<<(off%64)) != 0
}

// forRows returns the fragment's offsets below rows, the rows read from
// its data file, all in a bitset (rows/8 bytes: real memory, unlike the
// claimed row count a sparse part was kept for).
func (f droppedFragment) forRows(rows int64) droppedFragment {
	if f.sparse == nil {
		return f
	}
	bits := make([]uint64, (rows+63)/64)
	copy(bits, f.bits)
	for it := f.sparse.Iterator(); it.HasNext(); {
		o := it.Next()
		if int64(o) >= rows {
			break
		}
		bits[o/64] |= 1 << (o % 64)
	}
	return droppedFragment{bits: bits}
}

// empty reports whether nothing was added.
func (s *dropSet) empty() bool { return len(s.slots) == 0 && len(s.far) == 0 }
