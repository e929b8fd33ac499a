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
	"golang.org/x/sync/errgroup"

	"github.com/quiver-ingest/quiver/writers"
)

// writeMerge buffers rec (borrowed, retained) as merge source of s. The
// merge runs at Precommit against the then latest version, so the source
// of one transaction is held in memory until then. A plain source's keys
// are encoded and hashed here already, as the stream arrives (a
// changelog's are collapsed at Precommit, and so is a source that mixes
// both); a null key is ErrInvalid and stages nothing. While the guessed
// output (see eagerOut) holds, an auto-commit stream's is written here
// too (streamOut).
func (w *Writer) writeMerge(ctx context.Context, key writers.TxnKey, s *stage, rec arrow.RecordBatch) error {
	switch {
	case isChangelog(rec.Schema()):
		// Precommit encodes the buffered batches, all of them (a
		// transaction that mixes plain and changelog streams too).
		if s.build != nil {
			s.build.src.Release()
			s.build = nil
		}
		w.endStream(ctx, s)
	case len(s.source) == 0 || s.build != nil: // every batch so far plain
		if s.build == nil {
			// Sized like the last source, or for a few batches like this
			// one: growing the key set rehashes it.
			hint := max(w.lastSourceRows.Load(), 4*rec.NumRows())
			b, err := newSourceBuilder(rec.Schema(), w.cfg.On, int(hint))
			if err != nil {
				return fmt.Errorf("lance: merge source: %w", err)
			}
			s.build = b
			// Only an auto-commit key: a put's (Precommit follows its
			// stream) or a continuous stream's group (committed at its
			// interval, holding its files meanwhile as an append's
			// group does). The files hold a file-writer slot until
			// Precommit, which a transaction may call much later, with
			// other transactions waiting for the slot meanwhile.
			s.streamed = key.Auto && w.guessesOut() && s.files == nil && len(s.finished) == 0
		}
		if err := s.build.add(rec); err != nil {
			return fmt.Errorf("lance: merge source: %w", err)
		}
		w.streamOut(ctx, s)
	}
	rec.Retain()
	s.source = append(s.source, rec)
	return nil
}

// releaseSource frees s's buffered merge source.
func releaseSource(s *stage) {
	for _, r := range s.source {
		r.Release()
	}
	s.source = nil
	if s.build != nil {
		s.build.src.Release()
		s.build = nil
	}
}

// streamOut queues the source batch Write just added to s.build for s's
// data files, while s.streamed: the guessed output is then encoded as the
// stream arrives, on the stage's outStream, while the stream's transfer
// and key hashing go on; Precommit only waits for the last batches and
// finishes the last file. The guess ends when a key repeats or a write
// failed (endStream).
func (w *Writer) streamOut(ctx context.Context, s *stage) {
	if !s.streamed {
		return
	}
	src := s.build.src
	if src.keys.Len() != len(src.rows) || s.out != nil && s.out.failed.Load() {
		w.endStream(ctx, s)
		return
	}
	rec := src.recs[len(src.recs)-1]
	if rec.NumRows() == 0 {
		return // as writeRec: no file for no rows
	}
	if s.out == nil {
		s.out = w.startOutStream(ctx, s)
	}
	if !s.out.send(ctx, rec) {
		w.endStream(ctx, s)
	}
}

// endStream ends s's streamed guess: the writes stop and what they wrote
// is dropped now, giving its file-writer slot back (Precommit writes the
// output from the source).
func (w *Writer) endStream(ctx context.Context, s *stage) {
	if !s.streamed {
		return // nothing streamed: a merge stage has files only while it streams
	}
	if err := w.dropFiles(context.WithoutCancel(ctx), s); err != nil {
		w.log.Warn("lance: removing a merge's streamed output failed; vacuum removes what is left", "err", err)
	}
}

// guessesOut reports whether the endpoint's merges write every source
// row they match and every one they do not (update_all, insert_all): the
// case eagerOut guesses.
func (w *Writer) guessesOut() bool {
	return w.cfg.WhenMatched == "update_all" && w.cfg.WhenNotMatched == "insert_all"
}

// takeSource returns s's source, key-encoded: the one Write built, or
// (a changelog) the collapse of the buffered batches. The caller releases
// it.
func (w *Writer) takeSource(s *stage, mem memory.Allocator) (*source, error) {
	if b := s.build; b != nil {
		s.build = nil
		w.lastSourceRows.Store(int64(len(b.src.rows)))
		return b.src, nil
	}
	src, err := newSource(s.source, w.cfg.On, mem)
	if err != nil {
		return nil, fmt.Errorf("lance: merge source: %w", err)
	}
	return src, nil
}

// precommitMerge runs the merge of s's source against the latest version:
// it writes the updated and inserted rows as new data files and the
// touched fragments' new deletion files, and returns the descriptor Commit
// publishes. Any error removes every file it wrote before it returns and
// keeps the source staged, so that Precommit can be retried; an input
// error (null key, duplicate key under fail, when_matched fail) wraps
// writers.ErrInvalid. touched receives the ids of the existing
// fragments the merge changes, for the compaction gate to pin.
func (w *Writer) precommitMerge(ctx context.Context, s *stage, touched *[]uint64) (_ writers.Descriptor, err error) {
	if s.merged != nil {
		return s.merged, nil
	}
	// A precommit that fails (or panics) keeps the source staged, for a
	// retry (a sink's Precommit is repeatable) or Rollback, and leaves no
	// data file of its own behind.
	done := false
	defer func() {
		if !done {
			if derr := w.dropFiles(context.WithoutCancel(ctx), s); err != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	d, err := w.latest(ctx)
	if err != nil {
		return nil, err
	}
	desc := descriptor{Schema: s.schema, Merge: &mergeDesc{}}
	if d != nil {
		desc.Schema = &d.Manifest.Schema
		desc.Merge.ReadVersion = d.Version()
	}
	if s.schema != nil && d != nil && !s.schema.Equal(&d.Manifest.Schema) {
		return nil, writers.Errorf(writers.ErrConflict, "lance: the dataset schema changed while the transaction was open: replay the transaction")
	}
	mem := w.allocator()
	src, err := w.takeSource(s, mem)
	if err != nil {
		return nil, err
	}
	defer src.Release()
	// The stage's files, if any, are the streamed guess's: one that ended
	// dropped its own (endStream).
	streamed := s.streamed
	s.streamed = false
	eager := w.startEagerOut(ctx, s, src, streamed, mem)
	defer eager.stop() // before src is released, whatever happens
	plan := &mergePlan{deletes: map[uint64][]uint32{}, out: make([]outRef, 0, len(src.rows))}
	t, err := w.findTargets(ctx, d, src, plan, mem)
	if err == nil {
		err = planMerge(src, t, w.cfg, plan)
	}
	if err != nil {
		return nil, err
	}
	desc.Merge.Counts = plan.counts
	// The new data files and the deletion files are independent: write
	// them at the same time (the data files' encoding and I/O dominate).
	var deletions []string // written deletion files, removed on error
	g, gctx := errgroup.WithContext(ctx)
	// Guarded: these goroutines are the sink's, which gRPC's recovery
	// does not cover; a panic fails the merge.
	if eager != nil && slices.Equal(eager.out, plan.out) {
		defer context.AfterFunc(gctx, eager.cancel)() // a failed deletion file stops it
		g.Go(eager.wait)
	} else {
		eager.stop()
		if err := w.dropFiles(context.WithoutCancel(ctx), s); err != nil {
			return nil, err
		}
		g.Go(writers.Guard(func() error { return w.writeOut(gctx, s, src, plan.out, mem) }))
	}
	g.Go(writers.Guard(func() error {
		var err error
		deletions, err = w.writeDeletions(gctx, d, plan, desc.Merge)
		return err
	}))
	if err := g.Wait(); err != nil {
		errs := []error{err}
		for _, k := range deletions {
			if derr := w.bucket.Delete(context.WithoutCancel(ctx), k); derr != nil {
				errs = append(errs, fmt.Errorf("lance: remove deletion file %s of the failed merge: %w", k, derr))
			}
		}
		return nil, errors.Join(errs...)
	}
	// nil unless the index found the targets (w.idx, which a background
	// sync may drop, is read under idxMu only).
	s.patch = newIndexPatch(desc.Merge.ReadVersion, src, t, plan, s.finished, w.cfg)
	desc.Fragments = s.finished
	encoded, err := desc.encode()
	if err != nil {
		return nil, err
	}
	s.precommitted = append(s.precommitted, s.finished...)
	s.finished = nil
	s.merged = encoded
	done = true
	releaseSource(s)
	*touched = desc.Merge.touchedIDs()
	return encoded, nil
}

// eagerOut is a merge's output written before its plan is known, on the
// guess that every source row is written once, in source order: what
// update_all + insert_all does unless the source or the target repeats a
// key. Encoding the new data file then overlaps with the source's
// transfer (streamOut) and with finding the targets (the scan of a cold
// index, the lookups of a warm one). The plan confirms the guess, or the
// files are dropped and written again.
type eagerOut struct {
	out    []outRef // the guessed plan.out
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// startEagerOut starts writing src's rows into s's data files, as
// writeOut would for the guessed plan, or, when the stream wrote them
// already (streamed), finishing the last file; nil when the guess is
// known to be wrong: the endpoint's merge does not write every row it
// matches and every row it does not, or the source repeats a key.
func (w *Writer) startEagerOut(ctx context.Context, s *stage, src *source, streamed bool, mem memory.Allocator) *eagerOut {
	if !w.guessesOut() || src.keys.Len() != len(src.rows) {
		return nil
	}
	e := &eagerOut{out: make([]outRef, 0, len(src.rows)), done: make(chan struct{})}
	for _, r := range src.rows {
		if !r.del {
			e.out = append(e.out, outRef{r.rec, r.row, r.ord})
		}
	}
	ctx, e.cancel = context.WithCancel(ctx)
	go func() {
		defer close(e.done)
		// Guarded: a panic on this goroutine fails the merge.
		e.err = writers.Guard(func() error {
			if streamed {
				if o := s.out; o != nil {
					defer context.AfterFunc(ctx, o.cancel)()
				}
				if err := s.awaitOut(); err == nil {
					return w.finishFiles(s)
				}
				// The stream's writes failed: write the output again.
				if err := w.dropFiles(context.WithoutCancel(ctx), s); err != nil {
					return err
				}
			}
			return w.writeOut(ctx, s, src, e.out, mem)
		})()
	}()
	return e
}

// wait waits for the eager write and returns its error.
func (e *eagerOut) wait() error {
	<-e.done
	return e.err
}

// stop cancels e (nil: none) and waits for it.
func (e *eagerOut) stop() {
	if e != nil {
		e.cancel()
		<-e.done
	}
}

// writeOut writes the rows out of src, in order, into s's data files
// (finished ones are in s.finished; dropFiles removes them). A run of rows
// that is a contiguous range of one source batch (the usual case: every
// source row updates or inserts) is written as a slice of it, with no
// copy; other runs are gathered with Take.
func (w *Writer) writeOut(ctx context.Context, s *stage, src *source, out []outRef, mem memory.Allocator) error {
	cctx := compute.WithAllocator(ctx, mem)
	var idx []int32
	for i := 0; i < len(out); {
		j := i
		idx = idx[:0]
		for j < len(out) && out[j].rec == out[i].rec && len(idx) < maxFileRows {
			idx = append(idx, out[j].row)
			j++
		}
		var rec arrow.RecordBatch
		if isRange(idx) {
			first := int64(idx[0])
			rec = src.recs[out[i].rec].NewSlice(first, first+int64(len(idx)))
		} else {
			var err error
			if rec, err = takeRows(cctx, src.recs[out[i].rec], idx); err != nil {
				return err
			}
		}
		err := w.writeRec(ctx, s, rec)
		rec.Release()
		if err != nil {
			return err
		}
		i = j
	}
	return w.finishFiles(s)
}

// isRange reports whether idx counts up by one.
func isRange(idx []int32) bool {
	for k := 1; k < len(idx); k++ {
		if idx[k] != idx[k-1]+1 {
			return false
		}
	}
	return true
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
