package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog/dv"
	"github.com/quiver-ingest/quiver/writers/delta/deltaupsert"
	"github.com/quiver-ingest/quiver/writers/parquetio"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/tablesink"
)

// mergeOutcome is what mergeInto wrote and read.
type mergeOutcome struct {
	mu        sync.Mutex // guards adds, removes, updates and dvs while files are merged concurrently
	adds      []addFile  // rewritten files and live rows
	removes   []string   // paths of the rewritten (or wholly deleted) files
	updates   []dvUpdate // files marked by a new deletion vector instead
	dvs       *dv.DeletionVectorFile
	dvFile    string            // storage key of dvs once written
	dvSize    int64             // its size
	readFiles []string          // paths of the candidate files whose keys were read
	readDVs   map[string]string // path → deletion vector id of the candidates that had one
	emptied   int               // removes whose every row was gone (no rewrite)
	liveRows  int64
	// deletedKeys counts the changelog's deleted keys (matched or not).
	deletedKeys int64
	// identity filled the live rows' identity columns (nil without).
	identity *deltalayout.IdentityFill
}

func (o *mergeOutcome) record(removed string, adds []addFile) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if removed != "" {
		o.removes = append(o.removes, removed)
	}
	o.adds = append(o.adds, adds...)
}

// empty records that the file at path is removed: every row is gone.
func (o *mergeOutcome) empty(path string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.removes = append(o.removes, path)
	o.emptied++
}

// mark records that the file at path, of rows rows, loses the rows gone
// (ascending positions, the old deletion vector's included) through a new
// deletion vector.
func (o *mergeOutcome) mark(path string, rows int64, gone []int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	d, err := o.dvs.Add(gone)
	if err != nil {
		return fmt.Errorf("delta: upsert: deletion vector of %s: %w", path, err)
	}
	o.updates = append(o.updates, dvUpdate{Path: path, DeletionVector: d, Rows: rows})
	return nil
}

// mergeInto applies the collapse res to the table at snap, copy-on-write
// (docs/delta.md, "Upsert"):
//
//  1. candidates: active files whose partition values match a source key's
//     partition key values and whose key min/max statistics overlap the
//     source keys' (files without stats are candidates);
//  2. each candidate's key columns alone are read and matched against the
//     source keys; a file without a match is left alone;
//  3. a matched file is removed, and unless every row matched, read whole
//     and written again without its matched rows (updated or deleted);
//     in a table that enables deletion vectors it is kept instead, with a
//     new deletion vector marking them (and the rows its old one marked);
//  4. the live rows are written as new files, concurrently with 2 and 3.
//
// Rows an existing deletion vector marks are never matched nor copied.
// Files written carry statistics for stats. Table columns res lacks keep
// their values in updated rows and are null in inserted ones
// (KeptColumns): the live rows are then written after 2 and 3.
//
// Memory stays bounded whatever the table's size: candidates are streamed
// one at a time per worker (at most min(GOMAXPROCS, maxEncoders) at once),
// batch by batch, and only the source keys and the matched row positions
// (with their key ordinals and, when rows are tracked, ids) are kept. On failure every file written is deleted and nothing is
// returned.
func (w *Writer) mergeInto(ctx context.Context, snap *deltalog.Snapshot, res *merge.Result, layout *deltalayout.Layout) (*mergeOutcome, error) {
	table, err := snap.Schema()
	if err != nil {
		return nil, fmt.Errorf("delta: upsert: %w", err)
	}
	groups, err := deltaupsert.NewKeyGroups(res, deltaupsert.NewKeyColumns(w.cfg.MergeKeys, w.cfg.PartitionBy), table, layout.Cols)
	if err != nil {
		return nil, fmt.Errorf("delta: upsert: %w", err)
	}
	kept, err := deltaupsert.NewKeptColumns(snap, res, groups, layout.Cols)
	if err != nil {
		return nil, err
	}
	if kept != nil {
		defer kept.Release()
	}
	ident, err := deltalayout.NewIdentityFill(table)
	if err != nil {
		return nil, err
	}
	out := &mergeOutcome{liveRows: res.LiveRows, deletedKeys: res.DeletedRows, readDVs: map[string]string{}, identity: ident}
	useDVs := deletionVectorsEnabled(snap)
	if useDVs {
		out.dvs = dv.NewDeletionVectorFile()
	}
	var candidates []*deltalog.Add
	for _, a := range snap.Files() {
		grp := groups.ForFile(a)
		if grp == nil {
			continue
		}
		st, err := deltalog.ParseStats(a.Stats)
		if err != nil {
			st = nil // unreadable stats never prune
		}
		if grp.MayHold(st, groups.StatKeys) {
			candidates = append(candidates, a)
		}
	}
	slices.SortFunc(candidates, func(a, b *deltalog.Add) int { return strings.Compare(a.Path, b.Path) })
	for _, a := range candidates {
		out.readFiles = append(out.readFiles, a.Path)
		if a.DeletionVector != nil {
			out.readDVs[a.Path] = a.DeletionVector.UniqueID()
		}
	}

	writeLive := func(ctx context.Context) error {
		adds, err := w.writeLive(ctx, res.Live, kept, ident, layout)
		out.record("", adds)
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	// The live rows take the first slot, alongside (not instead of) the
	// candidate workers, unless they wait for the values kept from the
	// rows they update.
	g.SetLimit(1 + min(runtime.GOMAXPROCS(0), maxEncoders))
	// Guarded: these goroutines are the sink's, which gRPC's recovery
	// does not cover; a panic fails the upsert.
	if kept == nil {
		g.Go(writers.Guard(func() error { return writeLive(gctx) }))
	}
	for _, a := range candidates {
		g.Go(writers.Guard(func() error { return w.mergeFile(gctx, snap, a, groups, kept, layout, out) }))
	}
	err = g.Wait()
	if err == nil && kept != nil {
		err = writeLive(ctx)
	}
	if err == nil && useDVs && out.dvs.Len() > 0 {
		out.dvFile, out.dvSize = out.dvs.Key(), int64(len(out.dvs.Bytes()))
		if err = w.bucket.Put(ctx, out.dvFile, out.dvs.Bytes()); err != nil {
			err = fmt.Errorf("delta: upsert: write deletion vectors %s: %w", out.dvFile, err)
		}
	}
	if err != nil {
		return nil, errors.Join(err, w.deleteFiles(ctx, out.adds))
	}
	slices.Sort(out.removes)
	slices.SortFunc(out.updates, func(a, b dvUpdate) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// deleteFiles deletes files written for a plan that is abandoned.
func (w *Writer) deleteFiles(ctx context.Context, files []addFile) error {
	s := &stage{finished: files}
	return w.discard(ctx, s)
}

// writeLive writes the live rows (metadata columns stripped) as new files,
// split by partition, with the table columns they lack filled from kept
// (when not nil) and statistics for stats. It returns the finished files,
// also on failure (for deletion).
//
// With kept the rows wait for every candidate's match, so nothing else
// runs meanwhile: they are encoded on the key's encoder pool, on every
// core. Without, they are written alongside the candidate workers, on
// this goroutine. Filling (kept values, identity values, which must be
// taken in order) stays on this goroutine either way.
func (w *Writer) writeLive(ctx context.Context, live []arrow.RecordBatch, kept *deltaupsert.KeptColumns, ident *deltalayout.IdentityFill, layout *deltalayout.Layout) ([]addFile, error) {
	out := w.liveOutput(layout, kept != nil)
	err := func() error {
		for i, rec := range live {
			rec.Retain()
			if kept != nil {
				filled, err := kept.Fill(ctx, w.mem, rec, i)
				rec.Release()
				if err != nil {
					return err
				}
				rec = filled
			}
			filled, err := ident.Fill(&w.ids, w.mem, rec)
			rec.Release()
			if err != nil {
				return err
			}
			rec = filled
			if err := layout.CheckRows(ctx, w.mem, rec); err != nil {
				rec.Release()
				return err
			}
			parts, recs, err := w.parts.Split(ctx, w.mem, rec, layout.Cols)
			rec.Release() // split's records hold what they need
			if err != nil {
				return err
			}
			for i, p := range parts {
				if err == nil {
					err = out.send(ctx, tablesink.Part{Dir: p.Dir, Values: p.Values, Rec: recs[i]})
				} else {
					recs[i].Release()
				}
			}
			if err != nil {
				return err
			}
		}
		return nil
	}()
	return out.finish(err)
}

// liveOutput is where writeLive's rows go: a pool of encoders or one set
// of files on the caller's goroutine.
type liveOutput struct {
	pool *tablesink.Staged[*dataFile, addFile]
	fs   fileSet
}

// liveOutput returns writeLive's output, pooled or not.
func (w *Writer) liveOutput(layout *deltalayout.Layout, pooled bool) *liveOutput {
	if !pooled {
		return &liveOutput{fs: w.newFileSet(layout, 0)}
	}
	return &liveOutput{pool: w.newPool(layout)}
}

// send writes p, whose Rec it owns.
func (o *liveOutput) send(ctx context.Context, p tablesink.Part) error {
	if o.pool != nil {
		return o.pool.Send(ctx, p)
	}
	defer p.Rec.Release()
	return writePhysical(ctx, o.fs.Files, o.fs.layout.Cols, p)
}

// finish finishes the files after a successful writeLive (err nil), or
// abandons the open ones, and returns every finished file with the error.
func (o *liveOutput) finish(err error) ([]addFile, error) {
	if o.pool != nil {
		if err != nil {
			return o.pool.Abort(), err
		}
		return o.pool.Finish()
	}
	if err == nil {
		err = o.fs.FinishAll()
	}
	o.fs.Abort()
	return o.fs.Finished, err
}

// mergeFile matches the keys of candidate a against the source and, when
// some match, records in out how a loses those rows: removed (every row
// gone), marked by a new deletion vector (out.dvs set), or rewritten
// without them, and in kept (when not nil) the values of the matched rows
// the changelog lacks. Files of a failed rewrite are recorded too, for
// deletion.
//
// The key columns alone (and in a table that tracks rows, the
// materialized row id column: deltaupsert.FileMatcher) are read first (most
// candidates of a selective changelog hold no match and are never read
// whole); the matched rows found there are kept (their positions, key
// ordinals and row ids, bounded by the changelog) so that a rewrite, of
// every column, only gathers the rows to keep, and the columns the
// changelog lacks are read at the matched rows alone. A file whose every
// row matched is removed without a rewrite, and in a table with deletion
// vectors no file is read again unless the changelog lacks columns.
func (w *Writer) mergeFile(ctx context.Context, snap *deltalog.Snapshot, a *deltalog.Add, groups *deltaupsert.KeyGroups, kept *deltaupsert.KeptColumns, layout *deltalayout.Layout, out *mergeOutcome) error {
	key, err := deltalog.DecodePath(a.Path)
	if err != nil {
		return fmt.Errorf("delta: upsert: file %s: %w", a.Path, err)
	}
	deleted, err := dv.ReadDeletionVector(ctx, w.bucket, a.DeletionVector)
	if err != nil {
		return fmt.Errorf("delta: upsert: file %s: %w", a.Path, err)
	}
	var (
		r    storage.ReaderAtCloser
		size int64
	)
	open := func() (openErr error) {
		if r != nil {
			return nil
		}
		if r, size, openErr = w.bucket.OpenReader(ctx, key); openErr != nil {
			return fmt.Errorf("delta: upsert: open data file %s: %w", key, openErr)
		}
		return nil
	}
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	grp := groups.ForFile(a)
	rt := kept.RowIDs()
	fm, rows, cached := w.keys.Matches(a, layout.Cols.KeyLayout(groups.Keys.Data), grp, groups.Enc, rt)
	if !cached {
		if err := open(); err != nil {
			return err
		}
		m := deltaupsert.FileMatcher{Cache: w.keys, Mem: w.mem, Cols: layout.Cols, Grp: grp, Keys: groups.Keys.Data, Src: groups.Enc, File: a.Path, RT: rt, Base: a.BaseRowID, RowsHint: numRecords(a)}
		if fm, rows, err = m.MatchedRows(ctx, r, size); err != nil {
			return err
		}
	}
	fm.Without(deleted)
	if fm.Len() == 0 {
		return nil
	}
	if kept != nil {
		reader := func() (io.ReaderAt, int64, error) {
			err := open()
			return r, size, err
		}
		if err := kept.Gather(ctx, w.mem, reader, a, grp, &fm); err != nil {
			return err
		}
	}
	gone := dv.MergeRows(deleted, fm.Pos)
	switch {
	case int64(len(gone)) == rows:
		out.empty(a.Path)
		return nil
	case out.dvs != nil:
		return out.mark(a.Path, rows, gone)
	}
	if err := open(); err != nil {
		return err
	}
	dir := deltalayout.PartitionDir(layout.Cols.PhysicalNames(snap.Metadata.PartitionColumns), a.PartitionValues)
	adds, err := w.rewrite(ctx, r, size, a, dir, gone, deltalayout.RowTrackingOf(snap), layout)
	if err != nil {
		out.record("", adds)
		return err
	}
	out.record(a.Path, adds)
	return nil
}

// numRecords returns a's row count from its stats, 0 when unknown.
func numRecords(a *deltalog.Add) int {
	st, err := deltalog.ParseStats(a.Stats)
	if err != nil || st.NumRecords < 0 {
		return 0
	}
	return int(st.NumRecords)
}

// rewrite writes the rows of data file a (r, size) but the gone ones
// (ascending positions in the file) as new files under dir, with
// the layout's statistics and names, their row ids kept when rt is set. Reading and
// Parquet encoding are pipelined: this goroutine decodes and gathers, one
// more encodes, with one batch in between. It returns the finished files,
// also on failure (for deletion).
func (w *Writer) rewrite(ctx context.Context, r io.ReaderAt, size int64, a *deltalog.Add, dir string, gone []int64, rt *deltalayout.RowTracking, layout *deltalayout.Layout) ([]addFile, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fs := w.newFileSet(layout, 0)
	kept := make(chan arrow.RecordBatch, 1)
	var encErr error
	encoded := make(chan struct{})
	// A panic fails the rewrite, not the process; the goroutine keeps
	// receiving (and releasing) until the reader stops.
	encode := func(rec arrow.RecordBatch) (err error) {
		defer writers.Recover(&err)
		return w.write(ctx, &fs, dir, a.PartitionValues, rec)
	}
	finish := func() (err error) {
		defer writers.Recover(&err)
		return fs.FinishAll()
	}
	go func() {
		defer close(encoded)
		for rec := range kept {
			if encErr == nil {
				if encErr = encode(rec); encErr != nil {
					cancel() // stop reading: nothing more will be encoded
				}
			}
			rec.Release()
		}
		if encErr == nil {
			encErr = finish()
		}
	}()
	readErr := readKept(ctx, w.mem, layout.Cols, r, size, a, gone, rt, func(rec arrow.RecordBatch) error {
		select {
		case kept <- rec:
			return nil
		case <-ctx.Done():
			rec.Release()
			return ctx.Err()
		}
	})
	close(kept)
	<-encoded
	fs.Abort()
	if encErr != nil {
		return fs.Finished, encErr // the cause; readErr is then the cancellation
	}
	return fs.Finished, readErr
}

// readKept reads every column of data file a (r, size; every table column
// it holds, by cols: the table's column mapping, nil without) and hands
// send each batch without the gone rows (positions in the file,
// ascending), with their row ids and commit versions materialized when rt
// is set; send owns the batch it is given.
func readKept(ctx context.Context, mem memory.Allocator, cols *deltalayout.ColumnMap, r io.ReaderAt, size int64, a *deltalog.Add, gone []int64, rt *deltalayout.RowTracking, send func(arrow.RecordBatch) error) error {
	rr, err := cols.ReadFile(ctx, r, size, mem, parquetio.ReadOptions{})
	if err != nil {
		return fmt.Errorf("delta: upsert: read data file %s: %w", a.Path, err)
	}
	defer rr.Release()
	cctx := compute.WithAllocator(ctx, mem)
	var first int64 // the file position of the batch's first row
	var rows []int32
	for rr.Next() {
		rec := rr.RecordBatch()
		n := rec.NumRows()
		gone, rows = deltaupsert.TakeRows(gone, first, n, rows)
		if len(rows) == int(n) {
			first += n
			continue
		}
		if rt != nil {
			if rec, err = rt.Materialize(mem, rec, a, first); err != nil {
				return err
			}
		} else {
			rec.Retain()
		}
		first += n
		out := rec
		if len(rows) > 0 {
			out, err = deltalayout.Take(cctx, mem, rec, complement(rows, int(n)))
			rec.Release()
			if err != nil {
				return err
			}
		}
		if err := send(out); err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil {
		return fmt.Errorf("delta: upsert: read data file %s: %w", a.Path, err)
	}
	return nil
}

// complement returns the rows of 0..n-1 not in sorted.
func complement(sorted []int32, n int) []int32 {
	out := make([]int32, 0, n-len(sorted))
	j := 0
	for row := range int32(n) {
		if j < len(sorted) && sorted[j] == row {
			j++
			continue
		}
		out = append(out, row)
	}
	return out
}
