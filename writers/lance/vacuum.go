package lance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// Folders of a dataset that vacuum may delete from; anything else
// (_indices/, _refs/, the hint file) is never touched.
const (
	dataDir      = "data/"
	deletionsDir = "_deletions/"
	txnsDir      = "_transactions/"
	tagsDir      = "_refs/tags/"
)

// Vacuum removes old versions as Lance's cleanup_old_versions does: every
// version older than req.Retention goes, except the latest, tagged
// versions (_refs/tags/) and the versions holding a writer's newest
// committed epoch while younger than req.UntrackedMinAge (kept so that
// exactly-once replay detection survives for as long as a transaction may
// be in flight, see history; a writer idle for longer is forgotten, so
// that one-off writers such as Flight SQL's pin nothing forever). Then the
// data, deletion and transaction files only removed versions referenced
// are deleted once older than the retention, and files no version ever
// referenced (a failed or in-flight transaction's) once older than
// req.UntrackedMinAge (which must exceed the longest a transaction stays
// in flight). Index files are never deleted. Manifests go first, oldest
// first: a crash leaves files no version references, which a later
// vacuum deletes.
//
// Commits go on meanwhile. Vacuum plans against the latest version it
// read first: it never removes that one nor any newer one, nor a file
// they reference (it reads every version it lists, the newer ones
// included). It deletes manifests while no commit of this process is
// between reading the latest version and publishing the next
// (Pins.Vacuuming), so that no commit publishes a version number a
// vacuum just freed.
func (w *Writer) Vacuum(ctx context.Context, req writers.VacuumRequest) (writers.VacuumResult, error) {
	res := writers.VacuumResult{DryRun: req.DryRun, RetentionHours: req.Retention.Hours()}
	latest, err := w.latest(ctx)
	if err != nil || latest == nil {
		return res, err
	}
	// Read every version's epochs before any version goes.
	if _, _, err := w.hist.lookup(ctx, w.bucket, latest, ""); err != nil {
		return res, err
	}
	pins := w.hist.records()
	keepVersion := map[uint64]bool{latest.Version(): true}
	if err := w.taggedVersions(ctx, keepVersion); err != nil {
		return res, err
	}
	versions, naming, err := lancetable.Versions(ctx, w.bucket)
	if err != nil {
		return res, err
	}
	now := time.Now()
	cutoff := now.Add(-req.Retention)
	untracked := now.Add(-max(req.UntrackedMinAge, req.Retention))
	kept, removed := map[string]bool{}, map[string]bool{}
	var drop []uint64
	for _, v := range versions {
		d, err := lancetable.LoadVersion(ctx, w.bucket, v, naming)
		if errors.Is(err, storage.ErrNotExist) {
			continue // another vacuum removed it
		}
		if err != nil {
			return res, fmt.Errorf("lance: vacuum %s: %w", w.cfg.DatasetURI, err)
		}
		refs := kept
		pinned := pins[v] && !d.Manifest.Timestamp.Before(untracked)
		// Versions committed since latest was read are kept like it.
		if v < latest.Version() && !keepVersion[v] && !pinned && d.Manifest.Timestamp.Before(cutoff) {
			refs = removed
			drop = append(drop, v)
		}
		referenced(d, refs)
	}
	var objs []storage.Object
	for o, err := range w.bucket.List(ctx, "", "") {
		if err != nil {
			return res, fmt.Errorf("lance: vacuum %s: %w", w.cfg.DatasetURI, err)
		}
		objs = append(objs, o)
	}
	dropKeys := map[string]bool{}
	for _, v := range drop {
		dropKeys[lancetable.ManifestKey(v, naming)] = true
	}
	deleteObj := func(o storage.Object) error {
		if !req.DryRun {
			if err := w.bucket.Delete(ctx, o.Key); err != nil {
				return fmt.Errorf("lance: vacuum %s: %w", w.cfg.DatasetURI, err)
			}
		}
		return nil
	}
	if err := w.dropManifests(objs, dropKeys, deleteObj, &res); err != nil {
		return res, err
	}
	if !req.DryRun {
		w.hist.forget(drop)
	}
	for _, o := range objs {
		if kept[o.Key] || !hasAnyPrefix(o.Key, dataDir, deletionsDir, txnsDir) {
			continue
		}
		before := untracked
		if removed[o.Key] {
			before = cutoff
		}
		if !o.ModTime.Before(before) {
			continue
		}
		if err := deleteObj(o); err != nil {
			return res, err
		}
		res.FilesDeleted++
		res.BytesDeleted += o.Size
	}
	return res, nil
}

// dropManifests deletes the manifests among objs that dropKeys names
// (counting them in res), while no commit of this process is between
// reading the latest version and publishing the next.
func (w *Writer) dropManifests(objs []storage.Object, dropKeys map[string]bool, deleteObj func(storage.Object) error, res *writers.VacuumResult) error {
	defer w.pins.Vacuuming()()
	for _, o := range objs {
		if dropKeys[o.Key] {
			if err := deleteObj(o); err != nil {
				return err
			}
			res.LogFilesDeleted++
		}
	}
	return nil
}

// referenced adds the keys of the files version d needs to refs: its data
// files, deletion files and transaction file.
func referenced(d *lancetable.Dataset, refs map[string]bool) {
	for _, f := range d.Manifest.Fragments {
		for _, df := range f.Files {
			refs[lancetable.DataKey(df.Path)] = true
		}
		if f.Deletion != nil {
			refs[f.Deletion.Path(f.ID)] = true
		}
	}
	if d.Manifest.TxnFile != "" {
		refs[txnsDir+d.Manifest.TxnFile] = true
	}
}

// maxTagBytes bounds a tag file (a small JSON object).
const maxTagBytes = 1 << 20

// taggedVersions adds the versions of the dataset's tags to keep.
func (w *Writer) taggedVersions(ctx context.Context, keep map[uint64]bool) error {
	for o, err := range w.bucket.List(ctx, tagsDir, "") {
		if err != nil {
			return fmt.Errorf("lance: vacuum %s: list tags: %w", w.cfg.DatasetURI, err)
		}
		raw, err := w.bucket.GetMax(ctx, o.Key, maxTagBytes)
		if err != nil {
			return fmt.Errorf("lance: vacuum %s: read tag %s: %w", w.cfg.DatasetURI, o.Key, err)
		}
		var tag struct {
			Version uint64 `json:"version"`
		}
		if err := json.Unmarshal(raw, &tag); err != nil {
			return writers.Errorf(writers.ErrInvalid, "lance: vacuum %s: tag %s is not readable (%v): fix or remove it", w.cfg.DatasetURI, o.Key, err)
		}
		keep[tag.Version] = true
	}
	return nil
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
