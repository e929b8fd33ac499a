package lance

import (
	"context"
	"math/bits"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// dropSet is a set of row addresses (fragment id << 32 | offset) held as
// whole fragments or per-fragment offsets (droppedFragment), by fragment
// id. A key index sync tests every indexed address, in index order, where
// runs of addresses share a fragment: the last fragment looked up is
// kept, so most tests cost no map lookup. Fragment ids come from
// manifests other processes wrote: nothing is sized by one.
//
// has is for one goroutine at a time (it updates the kept fragment).
type dropSet struct {
	frags  map[uint64]*droppedFragment
	lastID uint64
	last   *droppedFragment // frags[lastID], nil when absent
	looked bool             // lastID was looked up
}

// droppedFragment is a fragment's deleted offsets: every one, a bitset
// when they are dense enough, else a roaring bitmap (a deletion file's
// offsets go up to the fragment's claimed rows, another process's word:
// a bitset sized by the largest offset could take 512 MiB for one).
type droppedFragment struct {
	all    bool            // every offset
	bits   []uint64        // else these offsets,
	sparse *roaring.Bitmap // or these
}

// bitsetFloorWords is the bitset a fragment's offsets may always take (8
// KiB); beyond it, at most 8 bytes per offset.
const bitsetFloorWords = 1 << 10

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
	// A bitset of at most 8 bytes per offset added (or the floor).
	if words := int(slices.Max(offs)/64) + 1; f.sparse == nil && words <= max(bitsetFloorWords, len(f.bits), len(offs)) {
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
		for w, word := range f.bits {
			for ; word != 0; word &= word - 1 {
				f.sparse.Add(uint32(64*w + bits.TrailingZeros64(word)))
			}
		}
		f.bits = nil
	}
	f.sparse.AddMany(offs)
}

// fragment returns id's entry, adding an empty one.
func (s *dropSet) fragment(id uint64) *droppedFragment {
	if s.frags == nil {
		s.frags = map[uint64]*droppedFragment{}
	}
	f := s.frags[id]
	if f == nil {
		f = &droppedFragment{}
		s.frags[id] = f
		s.looked = false
	}
	return f
}

// addFragment adds every address of fragment id.
func (s *dropSet) addFragment(id uint64) { s.fragment(id).all = true }

// addOffsets adds the offsets offs of fragment id.
func (s *dropSet) addOffsets(id uint64, offs []uint32) { s.fragment(id).add(offs) }

// has reports whether addr is in the set.
func (s *dropSet) has(addr uint64) bool {
	if id := addr >> 32; !s.looked || id != s.lastID {
		s.lastID, s.last, s.looked = id, s.frags[id], true
	}
	return s.last != nil && s.last.has(uint32(addr))
}

// none reports whether the fragment loses no offset.
func (f *droppedFragment) none() bool { return !f.all && len(f.bits) == 0 && f.sparse == nil }

// has reports whether offset off of the fragment is in the set.
func (f *droppedFragment) has(off uint32) bool {
	switch {
	case f.all:
		return true
	case f.sparse != nil:
		return f.sparse.Contains(off)
	}
	w := int(off / 64)
	return w < len(f.bits) && f.bits[w]&(1<<(off%64)) != 0
}

// empty reports whether nothing was added.
func (s *dropSet) empty() bool { return len(s.frags) == 0 }
