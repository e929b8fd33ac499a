package lance

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lanceformat"
)

// writeMerge buffers rec (borrowed, retained) as merge source of s. The
// merge runs at Precommit against the then latest version, so the source
// of one transaction is held in memory until then.
func (w *Writer) writeMerge(s *stage, rec arrow.RecordBatch) {
	rec.Retain()
	s.source = append(s.source, rec)
}

// releaseSource frees s's buffered merge source.
func releaseSource(s *stage) {
	for _, r := range s.source {
		r.Release()
	}
	s.source = nil
}

// precommitMerge runs the merge of s's source against the latest version:
// it writes the updated and inserted rows as new data files and the
// touched fragments' new deletion files, and returns the descriptor Commit
// publishes. Any error removes every file it wrote before it returns; an
// input error (null key, duplicate key under fail, when_matched fail)
// wraps writers.ErrInvalid.
func (w *Writer) precommitMerge(ctx context.Context, s *stage) (writers.Descriptor, error) {
	defer releaseSource(s)
	d, err := w.latest(ctx)
	if err != nil {
		return nil, err
	}
	desc := descriptor{Schema: s.schema, Merge: &mergeDesc{}}
	if d != nil {
		desc.Schema = &d.Manifest.Schema
		desc.Merge.ReadVersion = d.Version()
	} else if desc.Schema == nil {
		w.mu.Lock()
		desc.Schema = w.known
		w.mu.Unlock()
	}
	if s.schema != nil && d != nil && !s.schema.Equal(&d.Manifest.Schema) {
		return nil, writers.Errorf(writers.ErrConflict, "lance: the dataset schema changed while the transaction was open: replay the transaction")
	}
	mem := w.env.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	src, err := newSource(s.source, w.cfg.On, mem)
	if err != nil {
		return nil, fmt.Errorf("lance: merge source: %w", err)
	}
	defer src.Release()
	plan := &mergePlan{deletes: map[uint64][]uint32{}}
	t, err := w.findTargets(ctx, d, src, plan, mem)
	if err != nil {
		return nil, err
	}
	if err := planMerge(src, t, w.cfg, plan); err != nil {
		return nil, err
	}
	desc.Merge.Counts = plan.counts
	var deletions []string // written deletion files, removed on error
	fail := func(err error) (writers.Descriptor, error) {
		errs := []error{err, w.discard(context.WithoutCancel(ctx), s)}
		for _, k := range deletions {
			if derr := w.bucket.Delete(context.WithoutCancel(ctx), k); derr != nil {
				errs = append(errs, fmt.Errorf("lance: remove deletion file %s of the failed merge: %w", k, derr))
			}
		}
		return nil, errors.Join(errs...)
	}
	if err := w.writeOut(ctx, s, src, plan.out, mem); err != nil {
		return fail(err)
	}
	if d != nil {
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
			old, err := lanceformat.ReadDeletions(ctx, w.bucket, f)
			if err != nil {
				return fail(err)
			}
			all := unionSorted(old, offs)
			nd, raw, err := lanceformat.NewDeletionFile(d.Version(), all)
			if err != nil {
				return fail(err)
			}
			if nd.NumDeletedRows >= f.PhysicalRows {
				desc.Merge.Removed = append(desc.Merge.Removed, tf)
				continue
			}
			key := nd.Path(f.ID)
			if err := w.bucket.Put(ctx, key, raw); err != nil {
				return fail(fmt.Errorf("lance: write deletion file %s: %w", key, err))
			}
			deletions = append(deletions, key)
			w.m.delFiles.Inc()
			w.m.delBytes.Add(float64(len(raw)))
			desc.Merge.Updated = append(desc.Merge.Updated, updatedFragment{touchedFragment: tf, NewDeletion: *nd})
		}
	}
	desc.Fragments = s.finished
	s.precommitted = append(s.precommitted, s.finished...)
	s.finished = nil
	return desc.encode()
}

// writeOut writes the rows out of src, in order, into s's data files
// (finished ones are in s.finished; discard removes them).
func (w *Writer) writeOut(ctx context.Context, s *stage, src *source, out []outRef, mem memory.Allocator) error {
	cctx := compute.WithAllocator(ctx, mem)
	for i := 0; i < len(out); {
		j := i
		idx := []int32{}
		for j < len(out) && out[j].rec == out[i].rec && len(idx) < maxFileRows {
			idx = append(idx, out[j].row)
			j++
		}
		rec, err := takeRows(cctx, src.recs[out[i].rec], idx)
		if err != nil {
			return err
		}
		err = w.writeRec(ctx, s, rec)
		rec.Release()
		if err != nil {
			return err
		}
		i = j
	}
	if s.open != nil {
		return w.finishOpen(s)
	}
	return nil
}

// takeRows returns the rows idx of rec.
func takeRows(ctx context.Context, rec arrow.RecordBatch, idx []int32) (arrow.RecordBatch, error) {
	b := array.NewInt32Builder(compute.GetAllocator(ctx))
	defer b.Release()
	b.AppendValues(idx, nil)
	indices := b.NewArray()
	defer indices.Release()
	cols := make([]arrow.Array, 0, rec.NumCols())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for c := range int(rec.NumCols()) {
		col, err := compute.TakeArrayOpts(ctx, rec.Column(c), indices, compute.TakeOptions{BoundsCheck: false})
		if err != nil {
			return nil, fmt.Errorf("lance: take merge rows of column %q: %w", rec.Schema().Field(c).Name, err)
		}
		cols = append(cols, col)
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(idx))), nil
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
