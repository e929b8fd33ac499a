package lance

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// findTargets returns the target rows of src's keys in version d (and,
// under when_not_matched_by_source: delete, adds the other live rows to
// plan.deletes). It uses the endpoint's key index, synced to d first.
// While the index is cold (never built, emptied after a failure, or its
// key schema changed), it scans the key columns of every fragment instead,
// as a merge without an index does, and leaves building the index to the
// background after the commit (patchIndex): building it costs more than
// the scan. With key_index_max_bytes 0, or once the index outgrew it (or
// a fragment id does not fit its addresses), every merge scans. Merges of
// one endpoint plan one at a time while the index is in use.
func (w *Writer) findTargets(ctx context.Context, d *lancetable.Dataset, src *source, plan *mergePlan, mem memory.Allocator) (*targets, error) {
	bySource := w.cfg.WhenNotMatchedBySource == "delete"
	w.idxMu.Lock()
	defer w.idxMu.Unlock()
	if w.idx == nil || w.idx.cold(d) {
		return scanTargets(ctx, w.bucket, d, src, w.cfg, plan, mem)
	}
	if err := w.syncIndex(ctx, d, mem); err != nil {
		return nil, err
	}
	if w.idx == nil {
		return scanTargets(ctx, w.bucket, d, src, w.cfg, plan, mem)
	}
	return w.idx.targets(src, bySource, plan)
}

// syncIndex brings the key index to d (keyIndex.sync), under idxMu. An
// index that cannot hold the dataset is dropped (w.idx nil: merges scan
// from then on); any other failure leaves it empty and is returned.
func (w *Writer) syncIndex(ctx context.Context, d *lancetable.Dataset, mem memory.Allocator) error {
	st, err := w.idx.sync(ctx, w.bucket, d, w.cfg.On, int(w.cfg.KeyIndexMaxBytes), mem)
	w.m.indexKeys.Set(float64(w.idx.Len()))
	w.m.indexBytes.Set(float64(w.idx.MemoryBytes()))
	switch {
	case errors.Is(err, errNoIndex):
		w.log.Warn("lance: merges scan the key columns from now on", "err", err)
		w.idx = nil
		w.m.indexSyncs.WithLabelValues("disabled").Inc()
		return nil
	case err != nil:
		return err
	case st.rebuilt:
		w.m.indexSyncs.WithLabelValues("rebuilt").Inc()
	case st.changed > 0:
		w.m.indexSyncs.WithLabelValues("patched").Inc()
	default:
		w.m.indexSyncs.WithLabelValues("current").Inc()
	}
	return nil
}

// allocator is the endpoint's Arrow allocator.
func (w *Writer) allocator() memory.Allocator {
	if w.env.Allocator != nil {
		return w.env.Allocator
	}
	return memory.DefaultAllocator
}

// fragmentKeys encodes the key columns on of every physical row of
// fragment f (deleted rows included) with enc and calls key with each
// row's offset and key (valid during the call only).
func fragmentKeys(ctx context.Context, b *storage.Bucket, d *lancetable.Dataset, f *lancetable.Fragment, on []string, enc *merge.KeyEncoder, mem memory.Allocator, key func(off uint32, k []byte)) error {
	recs, err := d.ReadColumns(ctx, b, f, on, mem)
	if err != nil {
		return err
	}
	defer lancefile.ReleaseRecords(recs)
	return recordKeys(recs, enc, key)
}

// keyChunkRows is how many rows recordKeys encodes at once: the encoder's
// buffers (about 24 bytes a row for an int64 key) then stay in cache and
// are reused, where a whole fragment's record would fill fresh ones of
// tens of megabytes.
const keyChunkRows = 1 << 14

// recordKeys encodes the keys of recs, a fragment's rows one record after
// the other; a bad row (a null key) is reported at its fragment offset.
func recordKeys(recs []arrow.RecordBatch, enc *merge.KeyEncoder, key func(off uint32, k []byte)) error {
	var at uint32 // the fragment offset of the chunk's first row
	var cols []arrow.Array
	for _, rec := range recs {
		n := rec.NumRows()
		for lo := int64(0); lo < n; lo += keyChunkRows {
			hi := min(lo+keyChunkRows, n)
			cols = cols[:0]
			for _, c := range rec.Columns() {
				cols = append(cols, array.NewSlice(c, lo, hi))
			}
			err := enc.EncodeColumns(cols, int(hi-lo))
			for _, c := range cols {
				c.Release()
			}
			if err != nil {
				var re *merge.RowError
				if errors.As(err, &re) {
					re.Row += int(at)
					re.StreamRow += int64(at)
				}
				return err
			}
			for i := range enc.Len() {
				key(at+uint32(i), enc.Key(i))
			}
			at += uint32(hi - lo)
		}
	}
	return nil
}
