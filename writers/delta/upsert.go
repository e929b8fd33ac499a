package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltaupsert"
)

// Upsert (mode: upsert) is a MERGE by merge_keys, one per transaction (or
// auto-commit stream), copy-on-write, or with deletion vectors when the
// table enables them:
//
//   - Write folds the key's batches into a merge.Collapser (one row per
//     key, the changelog convention of package merge; _op, _ts_ms and
//     __weight never reach the table). The Collapser retains the batches
//     holding a live row, so a key's memory is its distinct rows' batches
//     plus about 38 bytes per distinct key (merge.Collapser).
//   - Precommit collapses, plans against the latest snapshot (mergeInto),
//     and for every target file holding a source key either rewrites it
//     without those rows or, with deletion vectors, marks them in a new
//     deletion vector of the file (one deletion-vector file per plan);
//     it writes the live rows as new files and returns a version 2
//     descriptor: the adds, the removed paths, the deletion-vector
//     updates, the files read (with their deletion vectors) and the
//     version read.
//   - Commit removes the rewritten files, re-adds the marked ones with
//     their new deletion vectors and adds the new ones in one Delta commit
//     (with the txn), checked against every commit after the read
//     version: a plan that went stale is refused (ErrConflict), never
//     published.

// upsertStage is the changelog side of an upsert key's stage.
type upsertStage struct {
	c *merge.Collapser // nil before the first batch and after the collapse
	// res is the collapse, kept until a precommit succeeds so that a
	// failed precommit (storage trouble) can be retried.
	res *merge.Result
	// desc is the first successful precommit's descriptor, returned again
	// by a repeated Precommit (a lost answer).
	desc writers.Descriptor
	// read is the files desc's plan read (pinned against optimize).
	read []string
}

// release frees the batches the stage holds. It is idempotent.
func (u *upsertStage) release() {
	if u.c != nil {
		u.c.Close()
		u.c = nil
	}
	if u.res != nil {
		u.res.Release()
		u.res = nil
	}
}

// writeUpsert admits rec (its metadata columns aside) against the table
// and folds it into the key's collapse, timestamp keys in the unit the
// files store (StoredKeys). A bad row (unknown _op, null key or
// weight) is ErrInvalid naming it, and nothing of rec is kept.
func (w *Writer) writeUpsert(ctx context.Context, key writers.TxnKey, s *stage, rec arrow.RecordBatch) error {
	if s.upsert == nil {
		s.upsert = &upsertStage{}
	}
	u := s.upsert
	if u.c == nil && (u.res != nil || u.desc != nil) {
		return writers.Errorf(writers.ErrWrongState, "delta: %s is precommitted: an upsert takes no rows after its precommit; commit it, or roll back and replay", key)
	}
	rec = deltaupsert.StoredKeys(w.mem, rec, w.cfg.MergeKeys)
	defer rec.Release()
	// Admitted first: a stage holds a collapse only once it has an
	// admitted schema, which its precommit re-admits (readmit).
	if _, err := w.admitStage(ctx, key, s, merge.StripMetadata(rec.Schema())); err != nil {
		return err
	}
	if u.c == nil {
		c, err := merge.NewCollapser(rec.Schema(), merge.Options{Keys: w.cfg.MergeKeys, Allocator: w.mem})
		if err != nil {
			return fmt.Errorf("delta: upsert: %w", err)
		}
		u.c = c
	}
	if err := u.c.Add(rec); err != nil {
		return fmt.Errorf("delta: upsert: %w", err)
	}
	return nil
}

// checkMergeKeys refuses merge keys that are not columns of the table: a
// key column the rows add (schema_evolution: add_columns) would be null
// in every existing row.
func (w *Writer) checkMergeKeys(snap *deltalog.Snapshot) error {
	table, err := snap.Schema()
	if err != nil {
		return fmt.Errorf("delta: table schema: %w", err)
	}
	for _, k := range w.cfg.MergeKeys {
		if _, ok := table.Field(k); !ok {
			return writers.Errorf(writers.ErrInvalid, "delta: merge key %q is not a column of table %s (columns: %s): fix merge_keys", k, w.cfg.TableURI, deltalayout.ColumnNames(table))
		}
	}
	return nil
}

// checkUpsertable refuses tables an upsert cannot rewrite correctly.
func (w *Writer) checkUpsertable(snap *deltalog.Snapshot) error {
	if strings.EqualFold(snap.Metadata.Configuration["delta.enableChangeDataFeed"], "true") {
		return writers.Errorf(writers.ErrInvalid, "delta: table %s has Change Data Feed enabled (delta.enableChangeDataFeed=true) and upsert does not write cdc files: disable it or use mode append", w.cfg.TableURI)
	}
	return w.checkMergeKeys(snap)
}

// precommitUpsert collapses the key's changelog, merges it into the table
// (mergeInto) and returns the descriptor; a repeated call returns the
// first answer. A failed merge deletes what it wrote and keeps the
// collapse, so Precommit may be retried.
func (w *Writer) precommitUpsert(ctx context.Context, key writers.TxnKey, s *stage) (writers.Descriptor, error) {
	d := descriptor{PartitionColumns: w.cfg.PartitionBy, Adds: []addFile{}}
	if s == nil || s.upsert == nil {
		return d.encode()
	}
	u := s.upsert
	if u.desc != nil {
		return u.desc, nil
	}
	if u.c == nil && u.res == nil {
		// Every batch was refused: nothing was admitted, nothing to plan.
		return d.encode()
	}
	if u.c != nil {
		res, err := u.c.Result()
		u.c = nil
		if err != nil {
			return nil, fmt.Errorf("delta: upsert: %w", err)
		}
		u.res = res
	}
	snap, err := w.latest(ctx)
	if err != nil {
		return nil, err
	}
	if snap != nil {
		// Planned on the snapshot the rows were admitted against (fit
		// may have found a newer one), so schema and plan agree.
		if snap, err = w.readmit(ctx, key, s); err != nil {
			return nil, err
		}
	}
	if snap == nil {
		// No table yet: the upsert is planned against the table its
		// commit creates (every live row is an insert).
		if snap, err = w.tableFor(s.schema); err != nil {
			return nil, err
		}
	}
	if err := w.checkUpsertable(snap); err != nil {
		return nil, err
	}
	if err := w.waitWarm(ctx); err != nil {
		return nil, err
	}
	if w.keys != nil {
		live := make(map[string]bool, snap.NumFiles())
		for _, a := range snap.Files() {
			live[a.Path] = true
		}
		w.keys.Retain(func(path string) bool { return live[path] })
	}
	merged, err := deltalog.ParseSchema(s.schema)
	if err != nil {
		return nil, err
	}
	layout, err := deltalayout.LayoutOf(snap, merged)
	if err != nil {
		return nil, err
	}
	out, err := w.mergeInto(ctx, snap, u.res, layout)
	if err != nil {
		return nil, err
	}
	d.Schema, d.Adds, d.MappedAfter = s.schema, out.adds, s.mappedAfter
	d.Constraints = deltalayout.CheckedConstraints(layout.Cons)
	if out.identity != nil && len(out.identity.Ranges) > 0 {
		d.Identity = out.identity.Ranges
	}
	d.Upsert = &upsertPlan{ReadVersion: snap.Version, ReadFiles: out.readFiles, Removes: out.removes,
		Updates: out.updates, DVFile: out.dvFile, DVFileSize: out.dvSize}
	if len(out.readDVs) > 0 {
		d.Upsert.ReadDVs = out.readDVs
	}
	desc, err := d.encode()
	if err != nil {
		return nil, err
	}
	s.precommitted = append(s.precommitted, out.adds...)
	u.desc, u.read = desc, out.readFiles
	w.m.upsertFiles.WithLabelValues("rewritten").Add(float64(len(out.removes) - out.emptied))
	w.m.upsertFiles.WithLabelValues("removed").Add(float64(out.emptied))
	w.m.upsertFiles.WithLabelValues("marked").Add(float64(len(out.updates)))
	u.res.Release()
	u.res = nil
	w.log.Debug("delta upsert planned", "table", w.cfg.TableURI, "read_version", snap.Version,
		"live", out.liveRows, "deleted", out.deletedKeys, "candidates", len(out.readFiles),
		"rewritten", len(out.removes), "marked", len(out.updates), "files", len(out.adds))
	return desc, nil
}

// readmit admits the stage's rows again, against the table's latest
// version (which latest has just cached, or a newer one), and returns
// that snapshot: an upsert writes its files only
// when it plans, so they take the table's column mapping as of then, not
// as of its first batch. An ALTER TABLE in between (a column renamed, or
// dropped and added again) would otherwise leave them under physical
// names the commit refuses, and the upsert would succeed only on replay.
func (w *Writer) readmit(ctx context.Context, key writers.TxnKey, s *stage) (*deltalog.Snapshot, error) {
	in, schema, mappedAfter := s.admitted, s.schema, s.mappedAfter
	s.admitted, s.schema, s.mappedAfter = nil, "", nil
	snap, err := w.admitStage(ctx, key, s, in)
	if err != nil { // kept for a retried Precommit
		s.admitted, s.schema, s.mappedAfter = in, schema, mappedAfter
	}
	return snap, err
}

// upsertOf returns the one upsert plan among ds (nil when none), noting
// its descriptor's index. An upsert's descriptors cannot be aggregated:
// two plans made apart could rewrite the same file or insert the same key
// twice.
func upsertOf(ds []*descriptor) (*upsertPlan, error) {
	var plan *upsertPlan
	for i, d := range ds {
		if d.Upsert == nil || (len(d.Adds) == 0 && len(d.Upsert.Removes)+len(d.Upsert.Updates) == 0) {
			continue
		}
		if plan != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor %d is a second upsert in one commit: an upsert transaction must be written through one server", i)
		}
		plan = d.Upsert
		plan.index = i
	}
	return plan, nil
}

// upsertActions returns the remove and add actions of plan against snap:
// a remove for every rewritten file, a remove and an add with the new
// deletion vector for every updated one. Each must still be the logical
// file the plan read (same path, same deletion vector); otherwise a later
// commit changed it, the plan is stale and is refused (ErrConflict).
func upsertActions(snap *deltalog.Snapshot, plan *upsertPlan, now int64) ([]deltalog.Action, error) {
	active := make(map[string]*deltalog.Add, snap.NumFiles())
	for _, a := range snap.Files() {
		active[a.Path] = a
	}
	read := func(p string) (*deltalog.Add, error) {
		a := active[p]
		if a == nil || a.DeletionVector.UniqueID() != plan.ReadDVs[p] {
			return nil, writers.Errorf(writers.ErrConflict, "delta: upsert: file %s, which this upsert rewrote or marked, was changed by a commit after version %d: roll back the transaction and replay it", p, plan.ReadVersion)
		}
		return a, nil
	}
	actions := make([]deltalog.Action, 0, len(plan.Removes)+2*len(plan.Updates))
	for _, p := range plan.Removes {
		a, err := read(p)
		if err != nil {
			return nil, err
		}
		actions = append(actions, deltalog.Action{Remove: a.Remove(now, true)})
	}
	for _, up := range plan.Updates {
		a, err := read(up.Path)
		if err != nil {
			return nil, err
		}
		marked := *a
		marked.DeletionVector, marked.DataChange, marked.Stats = up.DeletionVector, true, wideStats(a.Stats, up.Rows)
		actions = append(actions, deltalog.Action{Remove: a.Remove(now, true)}, deltalog.Action{Add: &marked})
	}
	return actions, nil
}

// wideStats returns stats with tightBounds false: rows a deletion vector
// marks still count in numRecords, minValues and maxValues, which are
// then bounds rather than exact values (the Delta protocol, "Per-file
// Statistics"). A file with
// a deletion vector must state numRecords: stats that are missing,
// unreadable or without it become {"numRecords": rows}.
func wideStats(stats string, rows int64) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(stats), &fields) != nil || fields["numRecords"] == nil {
		fields = map[string]json.RawMessage{"numRecords": json.RawMessage(strconv.FormatInt(rows, 10))}
	}
	fields["tightBounds"] = json.RawMessage("false")
	b, _ := json.Marshal(fields) // valid RawMessages always re-encode
	return string(b)
}

// upsertBase returns the snapshot an upsert was planned against, which its
// commit must be based on so that deltalog checks every later commit
// against the plan's read set (snap itself when nothing moved), once the
// read set checks out against it (checkReadSet).
func (w *Writer) upsertBase(ctx context.Context, snap *deltalog.Snapshot, plan *upsertPlan) (*deltalog.Snapshot, error) {
	base := snap
	switch {
	case plan.ReadVersion < 0 && snap.Version >= 0:
		return nil, writers.Errorf(writers.ErrConflict, "delta: upsert was planned before table %s existed and another writer created it since: roll back the transaction and replay it", w.cfg.TableURI)
	case plan.ReadVersion > snap.Version:
		return nil, writers.Errorf(writers.ErrConflict, "delta: upsert was planned at version %d but the table is at version %d (recreated?): roll back the transaction and replay it", plan.ReadVersion, snap.Version)
	case plan.ReadVersion < snap.Version:
		var err error
		if base, err = deltalog.LoadVersion(ctx, w.bucket, plan.ReadVersion); err != nil {
			return nil, fmt.Errorf("delta: upsert: read version %d it was planned at: %w", plan.ReadVersion, err)
		}
	}
	return base, w.checkReadSet(base, plan)
}

// upsertCommitOptions are the deltalog options of an upsert's commit: its
// read set is the files whose keys it read; with none (the keys fell in no
// file) it read the whole table, because a concurrent append could hold
// one of its keys, and a blind commit would let it through as duplicates.
func (w *Writer) upsertCommitOptions(plan *upsertPlan) deltalog.CommitOptions {
	preds := make([]string, len(w.cfg.MergeKeys))
	for i, k := range w.cfg.MergeKeys {
		preds[i] = fmt.Sprintf("target.%s = source.%s", k, k)
	}
	return deltalog.CommitOptions{
		Operation: "MERGE",
		OperationParameters: map[string]any{
			"predicate":                    strings.Join(preds, " AND "),
			"matchedPredicates":            `[{"actionType":"update"},{"actionType":"delete"}]`,
			"notMatchedPredicates":         `[{"actionType":"insert"}]`,
			"notMatchedBySourcePredicates": "[]",
		},
		ReadFiles:      slices.Clone(plan.ReadFiles),
		ReadWholeTable: len(plan.ReadFiles) == 0,
		EngineInfo:     "quiver",
		Logger:         w.log,
	}
}
