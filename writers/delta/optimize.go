package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog/dv"
	"github.com/quiver-ingest/quiver/writers/tablesink"
)

// maxOptimizeAttempts bounds how often Optimize plans again after losing
// to a concurrent commit that removed one of its files (an upsert, another
// optimize).
const maxOptimizeAttempts = 3

var _ writers.Maintainer = (*Writer)(nil)

// Optimize compacts the table as Spark's OPTIMIZE (bin-packing) does:
// within each partition, the files smaller than req.TargetFileBytes are
// rewritten into files of about that size, and every file carrying a
// deletion vector is rewritten without its deleted rows (purged). One
// commit removes the old files and adds the new ones with dataChange
// false and Spark's OPTIMIZE commitInfo, so streaming readers skip it.
//
// A partition is left alone when it has one such file without deletions.
// The commit conflicts with no concurrent append (deltalog rebases over
// them); when a concurrent commit removed one of its files (an upsert
// rewriting or marking it) Optimize deletes what it wrote and plans again
// on the new version, at most maxOptimizeAttempts times, then answers
// ErrConflict.
func (w *Writer) Optimize(ctx context.Context, req writers.OptimizeRequest) (writers.OptimizeResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := w.optimizeOnce(ctx, req)
		var conflict *deltalog.ConflictError
		if !errors.As(err, &conflict) || attempt == maxOptimizeAttempts {
			return res, err
		}
		w.log.Info("optimize lost to a concurrent commit; planning again", "winner", conflict.WinnerVersion, "attempt", attempt)
	}
}

// optimizeGroup is the files of one partition that optimize rewrites.
type optimizeGroup struct {
	dir   string
	files []*deltalog.Add
}

func (w *Writer) optimizeOnce(ctx context.Context, req writers.OptimizeRequest) (writers.OptimizeResult, error) {
	snap, err := w.latest(ctx)
	if err != nil || snap == nil {
		return writers.OptimizeResult{Version: writers.NoVersion}, err
	}
	res := writers.OptimizeResult{Version: snap.Version}
	table, err := snap.Schema()
	if err != nil {
		return res, fmt.Errorf("delta: optimize: table schema: %w", err)
	}
	layout, err := deltalayout.LayoutOf(snap, table)
	if err != nil {
		return res, err
	}
	groups := optimizeGroups(snap, layout.Cols.PhysicalNames(snap.Metadata.PartitionColumns), req.TargetFileBytes, w.pins.Pinned())
	if len(groups) == 0 {
		return res, nil
	}
	arrowTable, err := table.ToArrow()
	if err != nil {
		return res, fmt.Errorf("delta: optimize: table schema: %w", err)
	}
	fileSchema := deltalayout.DropFields(arrowTable, snap.Metadata.PartitionColumns)
	rt := deltalayout.RowTrackingOf(snap)
	if rt != nil {
		// Compacted rows keep their ids and commit versions.
		fileSchema = arrow.NewSchema(append(slices.Clone(fileSchema.Fields()), rt.Fields(true)...), nil)
	}

	var (
		adds    []addFile
		removed []*deltalog.Add
		dvs     int
	)
	for _, g := range groups {
		written, err := w.compact(ctx, g, fileSchema, rt, layout, req.TargetFileBytes)
		adds = append(adds, written...)
		if err != nil {
			return res, errors.Join(fmt.Errorf("delta: optimize: %w", err), w.deleteFiles(ctx, adds))
		}
		removed = append(removed, g.files...)
	}
	// Removed now, not when the rewrite started: vacuum's retention
	// counts from here.
	now := time.Now().UnixMilli()
	actions := make([]deltalog.Action, 0, len(removed)+len(adds))
	for _, a := range removed {
		if a.DeletionVector != nil {
			dvs++
		}
		res.FilesRemoved++
		res.BytesRemoved += a.Size
		actions = append(actions, deltalog.Action{Remove: a.Remove(now, false)})
	}
	for _, a := range adds {
		res.FilesAdded++
		res.BytesAdded += a.Size
		res.Rows += a.Rows
		actions = append(actions, deltalog.Action{Add: &deltalog.Add{
			Path: a.Path, PartitionValues: a.PartitionValues, Size: a.Size,
			ModificationTime: a.ModificationTime, DataChange: false, Stats: a.Stats,
		}})
	}
	var version int64
	err = w.pins.Commit(ctx, func(pins map[string]bool) error {
		for _, a := range removed {
			if pins[a.Path] {
				// An upsert precommitted while the files were rewritten
				// read this one: let it publish, and plan again.
				return &deltalog.ConflictError{Kind: deltalog.ConflictDeleteRead, WinnerVersion: snap.Version, Path: a.Path}
			}
		}
		var err error
		version, err = deltalog.Commit(ctx, w.bucket, snap, actions, deltalog.CommitOptions{
			Operation: "OPTIMIZE",
			// As Spark's OptimizeTableCommand writes them.
			OperationParameters: map[string]any{"predicate": "[]", "zOrderBy": "[]", "clusterBy": "[]", "auto": false},
			OperationMetrics:    optimizeMetrics(res, dvs),
			EngineInfo:          "quiver",
			CheckpointInterval:  w.env.Maintenance.CheckpointInterval,
			Logger:              w.log,
			Turn:                w.turnFor(),
		})
		return err
	})
	if err != nil {
		err = fmt.Errorf("delta: optimize %s: %w", w.cfg.TableURI, err)
		if errors.Is(err, writers.ErrOutcomeUnknown) {
			// The commit may have landed and reference them: leave the
			// files (a vacuum reclaims them if it did not).
			return res, err
		}
		// The new files are referenced by no version: delete them now
		// rather than leave them to a vacuum.
		return res, errors.Join(err, w.deleteFiles(ctx, adds))
	}
	w.cleanLogAfter(snap, version)
	w.m.version.Set(float64(version))
	res.Version = version
	return res, nil
}

// optimizeGroups picks, per partition, the files optimize rewrites: those
// below target and those with deletion vectors; a partition whose only
// pick is one file without deletions gains nothing and is skipped.
// partCols are the keys of the files' partitionValues (physical names).
// A partition is its values, not its directory: null and the string
// "__HIVE_DEFAULT_PARTITION__" share a directory, and files of the two
// must never be rewritten into one (tablesink.Part.Key).
func optimizeGroups(snap *deltalog.Snapshot, partCols []string, target int64, pinned map[string]bool) []optimizeGroup {
	byKey := map[string]*optimizeGroup{}
	var keys []string
	for _, a := range snap.Files() {
		if (a.Size >= target && a.DeletionVector == nil) || pinned[a.Path] {
			continue
		}
		dir := deltalayout.PartitionDir(partCols, a.PartitionValues)
		key := tablesink.Part{Dir: dir, Values: a.PartitionValues}.Key()
		g := byKey[key]
		if g == nil {
			g = &optimizeGroup{dir: dir}
			byKey[key] = g
			keys = append(keys, key)
		}
		g.files = append(g.files, a)
	}
	slices.Sort(keys)
	var out []optimizeGroup
	for _, key := range keys {
		g := byKey[key]
		if len(g.files) == 1 && g.files[0].DeletionVector == nil {
			continue
		}
		out = append(out, *g)
	}
	return out
}

// compactReaders is how many files compact decodes at once.
const compactReaders = 2

// compact rewrites the files of g, without their deleted rows, into new
// files of fileSchema rolled at target bytes. Reading and Parquet encoding
// are pipelined: compactReaders goroutines decode the files (reader r the
// files r, r+compactReaders, ...), this one encodes them in order, each
// file's batches passed one at a time, so memory stays at a batch per
// reader plus the open row group. Rows keep their row ids and commit
// versions when rt is set. It returns the finished files, also on failure
// (for deletion).
func (w *Writer) compact(ctx context.Context, g optimizeGroup, fileSchema *arrow.Schema, rt *deltalayout.RowTracking, layout *deltalayout.Layout, target int64) ([]addFile, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fs := w.newFileSet(layout, target)
	files := make([]chan arrow.RecordBatch, len(g.files))
	for i := range files {
		files[i] = make(chan arrow.RecordBatch, 1)
	}
	readers, rctx := errgroup.WithContext(ctx)
	for r := range min(compactReaders, len(g.files)) {
		readers.Go(writers.Guard(func() error {
			// Every channel of this reader is closed, also after a
			// failure: the encoder goes through them all.
			next := r
			defer func() {
				for ; next < len(files); next += compactReaders {
					close(files[next])
				}
			}()
			for ; next < len(files); next += compactReaders {
				out := files[next]
				err := w.readLive(rctx, g.files[next], fileSchema, layout.Cols, rt, func(rec arrow.RecordBatch) error {
					select {
					case out <- rec:
						return nil
					case <-rctx.Done():
						rec.Release()
						return rctx.Err()
					}
				})
				if err != nil {
					return err
				}
				close(out)
			}
			return nil
		}))
	}
	encode := func(rec arrow.RecordBatch) (err error) {
		defer writers.Recover(&err)
		return w.write(ctx, &fs, g.dir, g.files[0].PartitionValues, rec)
	}
	var encErr error
	for _, in := range files {
		for rec := range in {
			if encErr == nil {
				if encErr = encode(rec); encErr != nil {
					cancel() // stop reading: nothing more will be encoded
				}
			}
			rec.Release()
		}
	}
	readErr := readers.Wait()
	if encErr == nil && readErr == nil {
		encErr = func() (err error) {
			defer writers.Recover(&err)
			return fs.FinishAll()
		}()
	}
	fs.Abort()
	if encErr != nil {
		return fs.Finished, encErr // the cause; readErr is then the cancellation
	}
	return fs.Finished, readErr
}

// readLive hands send the live rows of data file a (deleted rows dropped)
// in batches of fileSchema, their row ids and commit versions materialized
// when rt is set; send owns each batch. cols is the table's column mapping
// (nil without).
func (w *Writer) readLive(ctx context.Context, a *deltalog.Add, fileSchema *arrow.Schema, cols *deltalayout.ColumnMap, rt *deltalayout.RowTracking, send func(arrow.RecordBatch) error) error {
	key, err := deltalog.DecodePath(a.Path)
	if err != nil {
		return fmt.Errorf("file %s: %w", a.Path, err)
	}
	gone, err := dv.ReadDeletionVector(ctx, w.bucket, a.DeletionVector)
	if err != nil {
		return fmt.Errorf("file %s: %w", a.Path, err)
	}
	r, size, err := w.bucket.OpenReader(ctx, key)
	if err != nil {
		return fmt.Errorf("open data file %s: %w", key, err)
	}
	defer r.Close()
	return readKept(ctx, w.mem, cols, r, size, a, gone, rt, func(rec arrow.RecordBatch) error {
		defer rec.Release()
		fit, err := deltalayout.Conform(ctx, w.mem, rec, fileSchema)
		if err != nil {
			return fmt.Errorf("file %s: %w", a.Path, err)
		}
		return send(fit)
	})
}

// optimizeMetrics is the operationMetrics of Spark's OPTIMIZE commit
// (strings, as Spark writes them).
func optimizeMetrics(res writers.OptimizeResult, dvs int) map[string]any {
	s := func(n int64) string { return strconv.FormatInt(n, 10) }
	return map[string]any{
		"numRemovedFiles":           s(res.FilesRemoved),
		"numRemovedBytes":           s(res.BytesRemoved),
		"numAddedFiles":             s(res.FilesAdded),
		"numAddedBytes":             s(res.BytesAdded),
		"numDeletionVectorsRemoved": s(int64(dvs)),
	}
}
