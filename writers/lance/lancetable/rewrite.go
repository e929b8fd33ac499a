package lancetable

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancepb/tablepb"
)

// RewriteGroup is one group of a Rewrite transaction (compaction): the
// fragments Old, exactly as the read version has them, are replaced by
// New (ids 0: assigned when the manifest is built), which hold the same
// live rows. As in Lance, the new fragments take the place of the old
// ones in the fragment list when those were contiguous, else they go last.
type RewriteGroup struct {
	Old, New []Fragment
}

func (g *RewriteGroup) toPB() *tablepb.Transaction_Rewrite_RewriteGroup {
	return &tablepb.Transaction_Rewrite_RewriteGroup{OldFragments: fragmentsToPB(g.Old), NewFragments: fragmentsToPB(g.New)}
}

// applyRewrite replaces the groups' old fragments in frags by their new
// ones, giving those ids from *next on. An old fragment frags lacks, or
// has with other data or deletion files, is writers.ErrConflict: the
// fragment changed under the plan (a concurrent delete, update or
// compaction).
func applyRewrite(frags []Fragment, groups []RewriteGroup, next *uint64) ([]Fragment, error) {
	out := slices.Clone(frags)
	for _, g := range groups {
		pos := make([]int, len(g.Old))
		for i, old := range g.Old {
			pos[i] = slices.IndexFunc(out, func(f Fragment) bool { return f.ID == old.ID })
			if pos[i] < 0 || !sameContent(&out[pos[i]], &old) {
				return nil, writers.Errorf(writers.ErrConflict, "lance: fragment %d changed after the compaction read it (a concurrent delete, update or compaction): plan it again", old.ID)
			}
		}
		nf := make([]Fragment, len(g.New))
		for i, f := range g.New {
			f.ID = *next
			*next++
			nf[i] = f
		}
		contiguous := true
		for i := 1; i < len(pos); i++ {
			contiguous = contiguous && pos[i] == pos[0]+i
		}
		if contiguous && len(pos) > 0 {
			out = slices.Replace(out, pos[0], pos[0]+len(pos), nf...)
			continue
		}
		out = slices.DeleteFunc(out, func(f Fragment) bool {
			return slices.ContainsFunc(g.Old, func(o Fragment) bool { return o.ID == f.ID })
		})
		out = append(out, nf...)
	}
	if *next-1 > math.MaxUint32 {
		return nil, writers.Errorf(writers.ErrInvalid, "lance: fragment id %d exceeds Lance's 32-bit max_fragment_id", *next-1)
	}
	return out, nil
}

// sameContent reports whether a and b have the same data files and
// deletion file.
func sameContent(a, b *Fragment) bool {
	if a.PhysicalRows != b.PhysicalRows || !slices.EqualFunc(a.Files, b.Files, func(x, y DataFile) bool { return x.Path == y.Path }) {
		return false
	}
	x, y := a.Deletion, b.Deletion
	if x == nil || y == nil {
		return x == y
	}
	return x.FileType == y.FileType && x.ReadVersion == y.ReadVersion && x.ID == y.ID && x.NumDeletedRows == y.NumDeletedRows
}

// changedFragments returns the ids of the existing fragments a Delete,
// Update or Rewrite transaction changed or removed, as Lance's conflict
// resolver reads them; ok is false for other operations.
func changedFragments(t *Transaction) (ids []uint64, ok bool) {
	ofFrags := func(fs []*tablepb.DataFragment) {
		for _, f := range fs {
			ids = append(ids, f.GetId())
		}
	}
	switch op := t.pb.GetOperation().(type) {
	case *tablepb.Transaction_Delete_:
		ofFrags(op.Delete.GetUpdatedFragments())
		ids = append(ids, op.Delete.GetDeletedFragmentIds()...)
	case *tablepb.Transaction_Update_:
		ofFrags(op.Update.GetUpdatedFragments())
		ids = append(ids, op.Update.GetRemovedFragmentIds()...)
	case *tablepb.Transaction_Rewrite_:
		ofFrags(op.Rewrite.GetOldFragments())
		for _, g := range op.Rewrite.GetGroups() {
			ofFrags(g.GetOldFragments())
		}
	default:
		return nil, false
	}
	return ids, true
}

// rewriteCompatible applies Lance's conflict rules to a Rewrite losing
// the race to other: appends and configuration changes never conflict; a
// delete, update or compaction conflicts only when it changed a fragment
// the rewrite replaces; anything else (an index created meanwhile may
// cover the rewritten fragments, an overwrite, a schema change)
// conflicts, and the compaction is planned again.
func rewriteCompatible(mine, other *Transaction) bool {
	switch other.Op {
	case OpAppend, OpReserveFrags, OpUpdateConfig:
		return true
	}
	ids, ok := changedFragments(other)
	if !ok {
		return false
	}
	for _, g := range mine.Groups {
		for _, f := range g.Old {
			if slices.Contains(ids, f.ID) {
				return false
			}
		}
	}
	return true
}

// Indexed returns a test for whether some index of the version covers a
// fragment (its fragment_bitmap; an index recording no bitmap, as old
// Lance versions wrote them, may cover every fragment). A compaction
// that does not remap indices must leave those fragments alone: an index
// addresses rows by fragment id and offset.
func (d *Dataset) Indexed() (func(id uint64) bool, error) {
	none := func(uint64) bool { return false }
	if d.index == nil {
		return none, nil
	}
	var sec tablepb.IndexSection
	if err := lancefile.Unmarshal(d.index, &sec); err != nil {
		return nil, fmt.Errorf("lance: index section of version %d: %w", d.Version(), err)
	}
	var bms []*roaring.Bitmap
	for _, idx := range sec.GetIndices() {
		raw := idx.GetFragmentBitmap()
		if raw == nil {
			return func(uint64) bool { return true }, nil
		}
		bm := roaring.New()
		if _, err := bm.ReadFrom(bytes.NewReader(raw)); err != nil {
			return nil, fmt.Errorf("lance: fragment bitmap of index %q (version %d): %w: %w", idx.GetName(), d.Version(), writers.ErrInvalid, err)
		}
		bms = append(bms, bm)
	}
	return func(id uint64) bool {
		return id <= math.MaxUint32 && slices.ContainsFunc(bms, func(bm *roaring.Bitmap) bool { return bm.Contains(uint32(id)) })
	}, nil
}
