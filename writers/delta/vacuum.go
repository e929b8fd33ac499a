package delta

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog/dv"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// Vacuum deletes the files of the table no version inside the retention
// references (vacuumable: data and deletion-vector files), then
// cleans the log up (CleanLog). A table that sets
// delta.deletedFileRetentionDuration keeps removed files at least that
// long, whatever req.Retention asks. Files no version references at all
// (a failed or in-flight transaction's) are kept until req.UntrackedMinAge.
func (w *Writer) Vacuum(ctx context.Context, req writers.VacuumRequest) (writers.VacuumResult, error) {
	res := writers.VacuumResult{DryRun: req.DryRun}
	snap, err := w.latest(ctx)
	if err != nil || snap == nil {
		return res, err
	}
	retention := req.Retention
	if d, ok := deltalog.DeletedFileRetention(snap); ok && d > retention {
		retention = d
	}
	res.RetentionHours = retention.Hours()
	now := time.Now()
	files, err := vacuumable(ctx, w.bucket, snap, now, retention, req.UntrackedMinAge)
	if err != nil {
		return res, fmt.Errorf("delta: vacuum %s: %w", w.cfg.TableURI, err)
	}
	if res.FilesDeleted, res.BytesDeleted, err = w.deleteObjects(ctx, files, req.DryRun); err != nil {
		return res, fmt.Errorf("delta: vacuum %s: %w", w.cfg.TableURI, err)
	}
	n, err := w.cleanLog(ctx, snap, now, req.DryRun)
	res.LogFilesDeleted = n
	return res, err
}

// vacuumable lists the objects under the table root a vacuum of snapshot s
// may delete at now, as Spark's VACUUM decides, and more cautiously:
//
//   - files a live add or a tombstone younger than retention references
//     (data files and their deletion-vector files) are kept;
//   - files of tombstones older than retention are deleted once their own
//     modification time is older than retention too;
//   - files no action of s references (written by a transaction that
//     failed, or is still in flight and may publish them) are deleted only
//     once older than untrackedMinAge;
//   - _delta_log and every hidden path (a segment starting with "_" or
//     ".", Spark's rule; partition directories "k=v" never do) are never
//     touched.
//
// Tombstones are the ones s knows: a checkpoint keeps them for the table's
// delta.deletedFileRetentionDuration (a week by default), so a retention
// above that treats older removed files as unreferenced (Spark does too).
func vacuumable(ctx context.Context, store deltalog.Store, s *deltalog.Snapshot, now time.Time, retention, untrackedMinAge time.Duration) ([]storage.Object, error) {
	cutoff := now.Add(-retention)
	keep := map[string]bool{}
	refer := func(path string, d *deltalog.DeletionVector) error {
		key, err := deltalog.DecodePath(path)
		if err != nil {
			return fmt.Errorf("delta: vacuum: file %q: %w", path, err)
		}
		keep[key] = true
		if d != nil && d.StorageType == dv.Absolute {
			// It may lie under the table root, where vacuum cannot tell
			// it from an unreferenced file: refuse, as for absolute adds.
			return fmt.Errorf("delta: vacuum: file %q has a deletion vector at an absolute path (%q): vacuum does not run on such tables: %w", path, d.PathOrInlineDv, writers.ErrInvalid)
		}
		if k, ok, err := dv.DeletionVectorKey(d); err != nil {
			return err
		} else if ok {
			keep[k] = true
		}
		return nil
	}
	for _, a := range s.Files() {
		if err := refer(a.Path, a.DeletionVector); err != nil {
			return nil, err
		}
	}
	removed := map[string]bool{} // expired tombstones' keys
	for _, r := range s.Tombstones() {
		if r.DeletionTimestamp == nil || *r.DeletionTimestamp >= cutoff.UnixMilli() {
			if err := refer(r.Path, r.DeletionVector); err != nil {
				return nil, err
			}
			continue
		}
		if key, err := deltalog.DecodePath(r.Path); err == nil {
			removed[key] = true
		}
		if k, ok, _ := dv.DeletionVectorKey(r.DeletionVector); ok {
			removed[k] = true
		}
	}
	untrackedCutoff := now.Add(-max(untrackedMinAge, retention))
	var out []storage.Object
	for obj, err := range store.List(ctx, "", "") {
		if err != nil {
			return nil, deltalog.StorageError("list", "", err)
		}
		if keep[obj.Key] || hidden(obj.Key) {
			continue
		}
		before := untrackedCutoff
		if removed[obj.Key] {
			before = cutoff
		}
		if obj.ModTime.Before(before) {
			out = append(out, obj)
		}
	}
	return out, nil
}

// hidden reports whether a key is under a path segment starting with "_"
// or "." (the log, Spark's _spark_metadata, temporary files), except
// partition directories ("_col=v" is data).
func hidden(key string) bool {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		if !strings.HasPrefix(seg, "_") && !strings.HasPrefix(seg, ".") {
			continue
		}
		if i < len(segs)-1 && strings.Contains(seg, "=") {
			continue
		}
		return true
	}
	return false
}

// minLogRetention floors the log retention: a precommitted upsert commits
// by reading the log from the version it planned against, which a
// transaction may hold for days (txn.MaxTTL is a week).
const minLogRetention = 7 * 24 * time.Hour

// cleanLog deletes the log files older than the log retention that a newer
// checkpoint covers (deltalog.ExpiredLogFiles): the table's
// delta.logRetentionDuration, else maintenance.log_retention, at least
// minLogRetention. A table with delta.enableExpiredLogCleanup false keeps
// its log, as Spark does.
func (w *Writer) cleanLog(ctx context.Context, snap *deltalog.Snapshot, now time.Time, dryRun bool) (int64, error) {
	if strings.EqualFold(snap.Metadata.Configuration["delta.enableExpiredLogCleanup"], "false") {
		return 0, nil
	}
	retention := max(deltalog.LogRetention(snap, w.env.Maintenance.LogRetention), minLogRetention)
	expired, err := deltalog.ExpiredLogFiles(ctx, w.bucket, now, retention)
	if err != nil {
		return 0, fmt.Errorf("delta: log cleanup %s: %w", w.cfg.TableURI, err)
	}
	n, _, err := w.deleteObjects(ctx, expired, dryRun)
	if err != nil {
		return n, fmt.Errorf("delta: log cleanup %s: %w", w.cfg.TableURI, err)
	}
	return n, nil
}

// cleanLogAfter starts log cleanup in the background when the commit of
// version v (on top of base) wrote a checkpoint, as Spark's metadata
// cleanup follows its checkpoints: the commit path never waits for it.
// One runs at a time; Close cancels and waits for it (warmCtx, warming).
func (w *Writer) cleanLogAfter(base *deltalog.Snapshot, v int64) {
	interval := int64(w.env.Maintenance.CheckpointInterval)
	if interval <= 0 {
		interval = int64(base.CheckpointInterval())
	}
	if v == 0 || v%interval != 0 || !w.cleaning.CompareAndSwap(false, true) {
		return
	}
	if !w.stages.IfOpen(func() { w.warming.Add(1) }) {
		w.cleaning.Store(false)
		return
	}
	go func() {
		defer w.warming.Done()
		defer w.cleaning.Store(false)
		var n int64
		err := writers.Guard(func() (err error) {
			n, err = w.cleanLog(w.warmCtx, base, time.Now(), false)
			return err
		})()
		switch {
		case err != nil:
			w.log.Warn("delta log cleanup failed; the next checkpoint tries again", "version", v, "err", err)
		case n > 0:
			w.log.Info("delta log cleanup", "version", v, "log_files_deleted", n)
		}
	}()
}

// deleteObjects deletes objs (counts them only, with dryRun), oldest log
// versions first as listed; it stops at the first failure, reporting what
// it deleted until then.
func (w *Writer) deleteObjects(ctx context.Context, objs []storage.Object, dryRun bool) (files, bytes int64, err error) {
	for _, o := range objs {
		if !dryRun {
			if err := w.bucket.Delete(ctx, o.Key); err != nil {
				return files, bytes, err
			}
		}
		files++
		bytes += o.Size
	}
	return files, bytes, nil
}
