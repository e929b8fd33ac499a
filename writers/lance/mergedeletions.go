package lance

import (
	"context"
	"fmt"
	"slices"

	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
)

// writeDeletions writes the new deletion file of every fragment of d
// (nil: none) that plan deletes rows from, its old deleted offsets merged
// in, and records it in m as updated, or as removed when no row is left.
// It returns the keys of the files written, also on error (the caller
// removes them).
func (w *Writer) writeDeletions(ctx context.Context, d *lancetable.Dataset, plan *mergePlan, m *mergeDesc) ([]string, error) {
	if d == nil {
		return nil, nil
	}
	var written []string
	for i := range d.Manifest.Fragments {
		f := &d.Manifest.Fragments[i]
		offs := plan.deletes[f.ID]
		if len(offs) == 0 {
			continue
		}
		tf := touchedFragment{ID: f.ID, Deletion: f.Deletion}
		for _, df := range f.Files {
			tf.Files = append(tf.Files, df.Path)
		}
		old, err := lancetable.ReadDeletions(ctx, w.bucket, f)
		if err != nil {
			return written, err
		}
		all := unionSorted(old, offs)
		nd, raw, err := lancetable.NewDeletionFile(d.Version(), all)
		if err != nil {
			return written, err
		}
		if nd.NumDeletedRows >= f.PhysicalRows {
			m.Removed = append(m.Removed, tf)
			continue
		}
		key := nd.Path(f.ID)
		if err := w.bucket.Put(ctx, key, raw); err != nil {
			return written, fmt.Errorf("lance: write deletion file %s: %w", key, err)
		}
		written = append(written, key)
		w.m.delFiles.Inc()
		w.m.delBytes.Add(float64(len(raw)))
		m.Updated = append(m.Updated, updatedFragment{touchedFragment: tf, NewDeletion: *nd, NewDeletionSize: int64(len(raw))})
	}
	return written, nil
}

// unionSorted returns old and offs (sorted in place) in ascending order,
// merging in one pass when old is sorted (deletion files usually are), so
// a fragment's deletions are not sorted again whole for every merge.
func unionSorted(old, offs []uint32) []uint32 {
	slices.Sort(offs)
	if !slices.IsSorted(old) {
		return append(old, offs...)
	}
	all := make([]uint32, 0, len(old)+len(offs))
	i, j := 0, 0
	for i < len(old) && j < len(offs) {
		if old[i] <= offs[j] {
			all = append(all, old[i])
			i++
		} else {
			all = append(all, offs[j])
			j++
		}
	}
	all = append(all, old[i:]...)
	return append(all, offs[j:]...)
}
