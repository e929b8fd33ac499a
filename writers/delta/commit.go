package delta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/tablesink"
)

// maxReplans bounds how often Commit plans its actions again after a
// conflict deltalog could not rebase (a concurrent schema change, or an
// overwrite racing another). deltalog itself retries plain lost races.
const maxReplans = 5

// Commit publishes descs in one Delta commit: every add of every
// descriptor (deduplicated by path), a txn{appId: key.Writer, version:
// key.Epoch} unless key is an auto-commit key, a metaData action when the
// files add columns (schema_evolution: add_columns), every active file
// removed in overwrite mode, and commitInfo first. When the table does not
// exist, this commit creates it (version 0 with protocol and metaData, the
// schema of the first descriptor with files); a concurrent first commit
// that wins makes this one an append on the table it created, or, with
// other columns, ErrInvalid. An auto-commit key without files commits
// nothing and answers the current version. A transaction without files
// (an empty epoch) commits its txn alone, creating the table first from
// the schema its stream sent when there is none (a key that never wrote,
// not even a schema, has no table to record the epoch in: NoVersion).
//
// Exactly-once: before every attempt the latest snapshot's txn version for
// key.Writer is read; when it is already ≥ key.Epoch the call changes
// nothing and reports Replayed with the version of the original commit
// (remembered, or found among the latest commits), else the current
// version. A commit that lost a race
// is rebased by deltalog, or re-planned here against the winner up to
// maxReplans times; then it fails with ErrConflict. A descriptor that is not
// a Delta descriptor of this table's layout and the endpoint's mode, that
// adds a file missing under the table root or of another size than it
// states, or whose upsert plan misstates what it read, is ErrInvalid and
// nothing is committed (descriptor.go, commitcheck.go). A failure to write the commit file whose result is unknown is
// a writers.OutcomeUnknownError.
func (w *Writer) Commit(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor) (writers.CommitInfo, error) {
	return w.commit(ctx, key, descs, nil)
}

// CommitSeqs is Commit of a group commit's auto-commit key that also
// records one txn{appId: writer, version: last seq} per continuous-stream
// writer of seqs, as kafka-delta-ingest records its partitions' offsets
// (writers.SeqCommitter). Every attempt checks seqs against the latest
// snapshot's txn versions (writers.SeqsState): all recorded is a replay,
// some recorded is ErrConflict and publishes nothing.
func (w *Writer) CommitSeqs(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor, seqs []writers.WriterSeq) (writers.CommitInfo, error) {
	return w.commit(ctx, key, descs, seqs)
}

func (w *Writer) commit(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor, seqs []writers.WriterSeq) (_ writers.CommitInfo, err error) {
	defer func() {
		if err == nil {
			w.pins.Unpin(key) // a failed commit is retried or rolled back
		}
	}()
	ds, upsert, err := w.decodeDescriptors(descs)
	if err != nil {
		return writers.CommitInfo{}, err
	}
	w.stages.Forget(ctx, key, w.log)

	// Files are checked once, before the first write (a created table
	// included) and after the replay check: a replay publishes nothing.
	verified := false
	verify := func() error {
		if verified {
			return nil
		}
		if err := w.verifyFiles(ctx, ds); err != nil {
			return err
		}
		verified = true
		return nil
	}
	lostCreate := false // a previous attempt lost the race to create the table
	loop := tablesink.Commit{Sink: "delta", Endpoint: w.env.Endpoint, Key: key, MaxReplans: maxReplans,
		Commits: w.m.commits, Conflicts: w.m.conflicts, Replans: w.m.retries, Log: w.log}
	// Only a lost race of the commit itself is planned again.
	stop := func(err error) (writers.CommitInfo, tablesink.Result, error) {
		return writers.CommitInfo{}, 0, tablesink.Final(err)
	}
	return loop.Loop(ctx, func(ctx context.Context, _ int) (writers.CommitInfo, tablesink.Result, error) {
		snap, err := w.latest(ctx)
		if err != nil {
			return stop(err)
		}
		if !hasFiles(ds) && (key.Auto && len(seqs) == 0 || snap == nil && !hasSchema(ds)) {
			// Nothing to publish and no epoch to record (auto-commit), or
			// no table to record it in and no schema to create one with.
			if snap == nil {
				return writers.CommitInfo{Version: writers.NoVersion}, tablesink.Uncounted, nil
			}
			return writers.CommitInfo{Version: snap.Version}, tablesink.Uncounted, nil
		}
		if snap == nil {
			if err := verify(); err != nil {
				return stop(err)
			}
			if snap, err = w.tableFromDescriptors(ds); err != nil {
				return stop(err)
			}
		}
		if info, done := w.replayed(ctx, key, snap); done {
			return info, tablesink.Replayed, nil
		}
		if done, err := writers.SeqsState(seqs, snap.TxnVersion); err != nil {
			return stop(err)
		} else if done {
			last := seqs[len(seqs)-1]
			return writers.CommitInfo{Version: w.findTxn(ctx, last.Writer, last.Last, snap.Version), Replayed: true}, tablesink.Replayed, nil
		}
		if err := verify(); err != nil {
			return stop(err)
		}
		base := snap
		if upsert != nil {
			if base, err = w.upsertBase(ctx, snap, upsert); err != nil {
				return stop(err)
			}
		}
		actions, err := w.plan(snap, key, seqs, ds, upsert)
		if err != nil {
			if lostCreate {
				err = fmt.Errorf("%w (another writer's first commit created the table meanwhile, with columns %s)", err, tableColumns(snap))
			}
			return stop(err)
		}
		version, err := w.commitPlanned(ctx, base, actions, upsert)
		var conflict *deltalog.ConflictError
		switch {
		case upsert != nil && errors.As(err, &conflict) && conflict.Kind != deltalog.ConflictTxn:
			// The rewrite was planned against a table that has moved on:
			// publishing it could resurrect or duplicate rows.
			return stop(fmt.Errorf("%w (upsert planned at version %d: roll back the transaction and replay it)", err, upsert.ReadVersion))
		case errors.As(err, &conflict):
			// The next round reads the winner: a txn of ours (a replay)
			// ends as Replayed, anything else is planned again (on the
			// table another writer created, when this one lost that race).
			lostCreate = conflict.Kind == deltalog.ConflictTableExists
			return writers.CommitInfo{}, 0, err
		case err != nil:
			return stop(err)
		}
		if version > snap.Version+1 {
			w.m.conflicts.Inc() // lost a race; deltalog rebased it
		}
		w.rememberCommit(key, version)
		recordCommitted(&w.ids, snap, actions, ds)
		if upsert != nil {
			w.warmKeys(append(addsOf(ds), readFilesOf(snap, upsert)...), deltalayout.ColumnMapOf(snap), deltalayout.RowTrackingOf(snap))
		}
		return writers.CommitInfo{Version: version}, tablesink.Committed, nil
	})
}

// tableColumns lists snap's columns for messages.
func tableColumns(snap *deltalog.Snapshot) string {
	table, err := snap.Schema()
	if err != nil {
		return "(unreadable)"
	}
	return deltalayout.ColumnNames(table)
}

// addsOf returns the files every descriptor of ds adds.
func addsOf(ds []*descriptor) []addFile {
	var adds []addFile
	for _, d := range ds {
		adds = append(adds, d.Adds...)
	}
	return adds
}

// readFilesOf returns the files upsert read that its commit (on top of
// snap) kept: the ones it marked, or left alone, with their row counts.
func readFilesOf(snap *deltalog.Snapshot, upsert *upsertPlan) []addFile {
	read := make(map[string]bool, len(upsert.ReadFiles))
	for _, p := range upsert.ReadFiles {
		read[p] = true
	}
	for _, p := range upsert.Removes {
		delete(read, p)
	}
	var files []addFile
	for _, a := range snap.Files() {
		if read[a.Path] {
			files = append(files, addFile{Path: a.Path, Rows: int64(numRecords(a))})
		}
	}
	return files
}

// hasFiles reports whether ds add or remove any file.
func hasFiles(ds []*descriptor) bool {
	for _, d := range ds {
		if len(d.Adds) > 0 || d.Upsert != nil && len(d.Upsert.Removes)+len(d.Upsert.Updates) > 0 {
			return true
		}
	}
	return false
}

// hasSchema reports whether a descriptor of ds carries the columns its
// stream sent.
func hasSchema(ds []*descriptor) bool {
	return slices.ContainsFunc(ds, func(d *descriptor) bool { return d.Schema != "" })
}

// committedAt is the epoch of a writer's last commit through this Writer
// and the table version it produced.
type committedAt struct{ epoch, version int64 }

// rememberCommit records the version key's commit produced, so that a
// repeated Commit answers it. Auto-commit keys never replay.
func (w *Writer) rememberCommit(key writers.TxnKey, version int64) {
	if key.Auto {
		return
	}
	w.mu.Lock()
	w.lastCommit[key.Writer] = committedAt{key.Epoch, version}
	w.mu.Unlock()
}

// replayLookback bounds how many commits replayed reads back to find the
// version that recorded a key this writer did not commit itself.
const replayLookback = 100

// decodeDescriptors decodes descs and checks them against the endpoint's
// mode; upsert is the plan they carry, if any.
func (w *Writer) decodeDescriptors(descs []writers.Descriptor) (ds []*descriptor, upsert *upsertPlan, err error) {
	if ds, err = writers.DecodeDescriptors(w.env.Endpoint, descs, decodeDescriptor); err != nil {
		return nil, nil, err
	}
	if err := w.checkModes(ds); err != nil {
		return nil, nil, err
	}
	if upsert, err = upsertOf(ds); err != nil {
		return nil, nil, err
	}
	return ds, upsert, nil
}

// CheckDescriptors checks descriptors handed over from other servers as
// Commit does before it publishes anything (writers.DescriptorChecker): a
// replayed key publishes nothing and passes.
func (w *Writer) CheckDescriptors(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor) error {
	ds, _, err := w.decodeDescriptors(descs)
	if err != nil {
		return err
	}
	snap, err := w.latest(ctx)
	if err != nil {
		return err
	}
	if snap != nil && !key.Auto {
		if v, ok := snap.TxnVersion(key.Writer); ok && v >= key.Epoch {
			return nil
		}
	}
	return w.verifyFiles(ctx, ds)
}

// replayed reports whether snap already records key, and the answer to
// give: the version of the commit that recorded key.Epoch when this writer
// made it or it is among the last replayLookback commits, else snap's
// version.
func (w *Writer) replayed(ctx context.Context, key writers.TxnKey, snap *deltalog.Snapshot) (writers.CommitInfo, bool) {
	if key.Auto {
		return writers.CommitInfo{}, false
	}
	v, ok := snap.TxnVersion(key.Writer)
	if !ok || v < key.Epoch {
		return writers.CommitInfo{}, false
	}
	w.mu.Lock()
	last, known := w.lastCommit[key.Writer]
	w.mu.Unlock()
	version := last.version
	if !known || last.epoch != key.Epoch {
		version = w.findTxn(ctx, key.Writer, key.Epoch, snap.Version)
	}
	return writers.CommitInfo{Version: version, Replayed: true}, true
}

// findTxn returns the version, at or below latest, of the commit holding
// the txn action {appID, version}, reading back at most replayLookback
// commits; latest when it is not found (older, in a checkpoint, or
// unreadable).
func (w *Writer) findTxn(ctx context.Context, appID string, version, latest int64) int64 {
	for v := latest; v >= 0 && v > latest-replayLookback; v-- {
		actions, err := deltalog.ReadCommit(ctx, w.bucket, v)
		if err != nil {
			break
		}
		for _, a := range actions {
			if a.Txn != nil && a.Txn.AppID == appID && a.Txn.Version == version {
				return v
			}
		}
	}
	return latest
}

// plan builds the actions of one commit attempt on top of snap (deltalog
// adds commitInfo); upsert, when set, adds the removes of its rewritten
// files, and each of seqs a txn action.
func (w *Writer) plan(snap *deltalog.Snapshot, key writers.TxnKey, seqs []writers.WriterSeq, ds []*descriptor, upsert *upsertPlan) ([]deltalog.Action, error) {
	now := time.Now().UnixMilli()
	meta := &snap.Metadata
	table, err := meta.Schema()
	if err != nil {
		return nil, fmt.Errorf("delta: table schema: %w", err)
	}
	if err := checkConstraints(meta, ds); err != nil {
		return nil, err
	}

	// Files already live (published by an earlier commit of another key
	// that was handed this descriptor) are not added again.
	seen := make(map[string]bool)
	for _, a := range snap.Files() {
		seen[a.Path] = true
	}
	var (
		adds    []deltalog.Action
		keep    = make(map[string]bool) // live files this overwrite publishes
		evolved = table
		// Column mapping: the ids columns added by the descriptors take
		// must be above maxID, which then advances.
		mapped = deltalog.ColumnMappingMode(meta.Configuration) != "none"
		maxID  = deltalog.MaxColumnID(meta.Configuration)
	)
	for i, d := range ds {
		if !slices.Equal(d.PartitionColumns, meta.PartitionColumns) {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor %d was written for partition columns %q, the table has %q (a partition column renamed?): set partition_by to the table's partition columns, then replay the transaction", i, d.PartitionColumns, meta.PartitionColumns)
		}
		if len(d.Adds) == 0 {
			continue
		}
		files, err := deltalog.ParseSchema(d.Schema)
		if err != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor %d: %w", i, err)
		}
		if err := deltalayout.CheckNames(files, meta.Configuration); err != nil {
			return nil, fmt.Errorf("%w (descriptor %d)", err, i)
		}
		if mapped {
			if err := deltalayout.CheckMappedColumns(evolved, maxID, files, d.MappedAfter); err != nil {
				return nil, fmt.Errorf("%w (descriptor %d)", err, i)
			}
		}
		if evolved, err = deltalayout.Reconcile(evolved, files, w.cfg.SchemaEvolution == EvolveAddColumns); err != nil {
			return nil, fmt.Errorf("%w (descriptor %d; the table may have changed since precommit: replay the transaction)", err, i)
		}
		for _, a := range d.Adds {
			if seen[a.Path] {
				keep[a.Path] = true
				continue // handed over twice, or already published
			}
			seen[a.Path] = true
			adds = append(adds, deltalog.Action{Add: &deltalog.Add{
				Path: a.Path, PartitionValues: a.PartitionValues, Size: a.Size,
				ModificationTime: a.ModificationTime, DataChange: true, Stats: a.Stats,
			}})
		}
	}

	evolved, idChanged, err := identityHighWaterMarks(evolved, ds, &w.ids)
	if err != nil {
		return nil, err
	}
	var actions []deltalog.Action
	if len(evolved.Fields) != len(table.Fields) || idChanged {
		m := *meta
		m.SchemaString = evolved.String()
		if mapped {
			top := max(maxID, deltalog.HighestColumnID(evolved))
			if err := deltalog.CheckColumnMapping(evolved, top); err != nil {
				return nil, writers.Errorf(writers.ErrInvalid, "delta: the columns the descriptors add: %w: replay the transactions separately", err)
			}
			m.Configuration = maps.Clone(meta.Configuration)
			m.Configuration[deltalog.ColumnMappingMaxIDKey] = strconv.FormatInt(top, 10)
		}
		actions = append(actions, deltalog.Action{MetaData: &m})
	}
	if !key.Auto {
		actions = append(actions, deltalog.Action{Txn: &deltalog.Txn{AppID: key.Writer, Version: key.Epoch, LastUpdated: &now}})
	}
	for _, s := range seqs {
		actions = append(actions, deltalog.Action{Txn: &deltalog.Txn{AppID: s.Writer, Version: s.Last, LastUpdated: &now}})
	}
	if upsert != nil {
		files, err := upsertActions(snap, upsert, now)
		if err != nil {
			return nil, err
		}
		actions = append(actions, files...)
	}
	if w.cfg.WriteMode == ModeOverwrite {
		for _, a := range snap.Files() {
			if !keep[a.Path] {
				actions = append(actions, deltalog.Action{Remove: a.Remove(now, true)})
			}
		}
	}
	return append(actions, adds...), nil
}
