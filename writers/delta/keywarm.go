package delta

import (
	"context"
	"fmt"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltaupsert"
)

// warmKeys indexes, in the background, the keys of files an upsert commit
// added or read, so that the next upsert finds them in the key cache
// instead of reading them on its critical path (its precommit waits for the warm-up
// first: waitWarm). It is best effort: a file it could not read is read
// by the next upsert that needs it. Close cancels and waits for it.
// cols is the table's column mapping (nil without), rt its materialized
// row tracking columns (nil when it does not track rows), whose row ids
// are indexed too.
func (w *Writer) warmKeys(files []addFile, cols *deltalayout.ColumnMap, rt *deltalayout.RowTracking) {
	if w.keys == nil || len(files) == 0 {
		return
	}
	// Under the stages' lock: Close, having closed them, waits for it.
	if !w.stages.IfOpen(func() { w.warming.Add(1) }) {
		return
	}
	w.mu.Lock()
	prev := w.warmDone
	done := make(chan struct{})
	w.warmDone = done
	w.mu.Unlock()
	go func() {
		defer w.warming.Done()
		defer close(done)
		if prev != nil {
			<-prev // one warm-up at a time, in commit order
		}
		for _, a := range files {
			if w.warmCtx.Err() != nil {
				return
			}
			err := w.warmGuarded(a, cols, rt)
			switch stack := writers.PanicStack(err); {
			case stack != "":
				w.log.Error("delta: indexing the keys of a new file panicked; the next upsert reads it", "file", a.Path, "err", err, "stack", stack)
			case err != nil:
				w.log.Debug("delta: indexing the keys of a new file failed; the next upsert reads it", "file", a.Path, "err", err)
			}
		}
	}()
}

// warmGuarded is warmFile on the warm-up goroutine, with a panic (an
// unreadable file) its error: the warm-up is best effort and must not end
// the process.
func (w *Writer) warmGuarded(a addFile, cols *deltalayout.ColumnMap, rt *deltalayout.RowTracking) (err error) {
	defer writers.Recover(&err)
	return w.warmFile(w.warmCtx, a, cols, rt)
}

// warmFile indexes the keys (and with rt, the materialized row ids) of
// file a unless the cache has them, or their index would not fit in it
// (about keyIndexBytesPerRow per row, plus rowIDBytesPerRow with rt).
func (w *Writer) warmFile(ctx context.Context, a addFile, cols *deltalayout.ColumnMap, rt *deltalayout.RowTracking) error {
	fk := w.keys.Get(a.Path, cols.KeyLayout(deltaupsert.NewKeyColumns(w.cfg.MergeKeys, w.cfg.PartitionBy).Data))
	perRow := int64(keyIndexBytesPerRow)
	if rt != nil {
		perRow += rowIDBytesPerRow
	}
	if fk != nil && (rt == nil || fk.IDCol == rt.IDCol) || a.Rows*perRow > int64(w.keys.MaxBytes()) {
		return nil
	}
	key, err := deltalog.DecodePath(a.Path)
	if err != nil {
		return err
	}
	r, size, err := w.bucket.OpenReader(ctx, key)
	if err != nil {
		return fmt.Errorf("open data file %s: %w", key, err)
	}
	defer r.Close()
	m := deltaupsert.FileMatcher{Cache: w.keys, Mem: w.mem, Cols: cols, Keys: deltaupsert.NewKeyColumns(w.cfg.MergeKeys, w.cfg.PartitionBy).Data, File: a.Path, RT: rt, RowsHint: int(a.Rows)}
	_, _, err = m.MatchedRows(ctx, r, size)
	return err
}

// keyIndexBytesPerRow estimates an index's memory per row of a file: an
// int64 key costs about 30 bytes (merge.KeyIndex); wider keys cost more,
// and put drops an index that turns out too large.
const keyIndexBytesPerRow = 30

// rowIDBytesPerRow is what a file's cached materialized row ids add per row.
const rowIDBytesPerRow = 8

// waitWarm waits for the last warm-up started (warmKeys), so that an
// upsert plans with every key it indexes.
func (w *Writer) waitWarm(ctx context.Context) error {
	w.mu.Lock()
	done := w.warmDone
	w.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("delta: upsert: waiting for the key index: %w", ctx.Err())
	}
}
