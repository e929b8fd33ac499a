package lance

import (
	"context"

	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// dropSet is a set of row addresses (fragment id << 32 | offset) held as
// whole fragments or per-fragment offset bitsets, in a slice indexed by
// fragment id: testing an address costs two slice loads, which matters
// because a key index sync tests every indexed address (a map per
// fragment cost most of a warm-index merge). The slice grows to the
// largest id added (8 bytes per id; Lance numbers fragments from 0 up, one
// per data file written, so ids stay near the count of fragments ever
// created).
type dropSet struct {
	frags []*droppedFragment
}

type droppedFragment struct {
	all  bool     // every offset
	bits []uint64 // else these offsets
}

// deletedOffsets returns the offsets fragment f's deletion file deletes.
func deletedOffsets(ctx context.Context, b *storage.Bucket, f *lancetable.Fragment) (droppedFragment, error) {
	var gone droppedFragment
	offs, err := lancetable.ReadDeletions(ctx, b, f)
	for _, o := range offs {
		gone.addOffset(o)
	}
	return gone, err
}

// fragment returns id's entry, adding an empty one.
func (s *dropSet) fragment(id uint64) *droppedFragment {
	if id >= uint64(len(s.frags)) {
		s.frags = append(s.frags, make([]*droppedFragment, id+1-uint64(len(s.frags)))...)
	}
	if s.frags[id] == nil {
		s.frags[id] = &droppedFragment{}
	}
	return s.frags[id]
}

// addFragment adds every address of fragment id.
func (s *dropSet) addFragment(id uint64) { s.fragment(id).all = true }

// addOffsets adds the offsets offs of fragment id.
func (s *dropSet) addOffsets(id uint64, offs []uint32) {
	f := s.fragment(id)
	for _, o := range offs {
		f.addOffset(o)
	}
}

// addOffset adds offset off of the fragment.
func (f *droppedFragment) addOffset(off uint32) {
	w := int(off / 64)
	if w >= len(f.bits) {
		f.bits = append(f.bits, make([]uint64, w+1-len(f.bits))...)
	}
	f.bits[w] |= 1 << (off % 64)
}

// has reports whether addr is in the set.
func (s *dropSet) has(addr uint64) bool {
	id := addr >> 32
	if id >= uint64(len(s.frags)) || s.frags[id] == nil {
		return false
	}
	return s.frags[id].has(uint32(addr))
}

// none reports whether the fragment loses no offset.
func (f *droppedFragment) none() bool { return !f.all && len(f.bits) == 0 }

// has reports whether offset off of the fragment is in the set.
func (f *droppedFragment) has(off uint32) bool {
	if f.all {
		return true
	}
	w := int(off / 64)
	return w < len(f.bits) && f.bits[w]&(1<<(off%64)) != 0
}

// empty reports whether nothing was added.
func (s *dropSet) empty() bool { return len(s.frags) == 0 }
