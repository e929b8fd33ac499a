package lance

import (
	"context"
	"strconv"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/tablesink"
)

// maxReplans bounds how often Commit plans again after a conflict
// lancetable could not rebase (a concurrent create, schema change or
// overwrite).
const maxReplans = 5

// Commit publishes every fragment of descs in one Lance version whose
// transaction properties record key (unless key.Auto): an Append, or the
// Overwrite that creates the dataset; a merge_insert descriptor (at most
// one per commit) makes it an Update that also replaces the fragments the
// merge deleted rows from and drops those it emptied, provided each is
// unchanged since the precommit (see mergeDesc.apply). An auto-commit key
// without fragments commits nothing. A transaction without rows (an empty
// epoch) commits a version that records its epoch, creating the dataset
// with no fragments first, in the schema its stream sent, when there is
// none (a key that sent not even a schema has nowhere to record it). Of
// two first commits, the loser
// appends to the dataset the winner created, or, with another schema,
// fails with ErrInvalid. A key whose epoch the history already records is
// answered Replayed with the version that recorded it, changing nothing.
// Errors: ErrInvalid for foreign descriptors (another sink, version or
// mode), files missing under the
// dataset root or of another size than their descriptor states (checked
// before anything is published, for this server's own descriptors too),
// or a schema that no longer matches; ErrConflict when the dataset changed incompatibly maxReplans
// times, or a merge's fragments changed since its precommit; a writers.OutcomeUnknownError when the manifest write's outcome
// is unknown. Every call that commits, replays or fails counts in
// quiver_lance_commits_total.
func (w *Writer) Commit(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor) (writers.CommitInfo, error) {
	return w.commit(ctx, key, descs, nil)
}

// CommitSeqs is Commit of a group commit's auto-commit key whose version
// also records each continuous-stream writer's last seq, in the
// transaction property quiver.seqs (writers.SeqCommitter), which
// CommittedEpoch reads like an epoch. Every attempt checks seqs against
// the history first (writers.SeqsState): all recorded is a replay, some
// recorded is ErrConflict and publishes nothing.
func (w *Writer) CommitSeqs(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor, seqs []writers.WriterSeq) (writers.CommitInfo, error) {
	return w.commit(ctx, key, descs, seqs)
}

func (w *Writer) commit(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor, seqs []writers.WriterSeq) (writers.CommitInfo, error) {
	ds, m, err := w.decodeDescriptors(descs)
	if err != nil {
		return writers.CommitInfo{}, err
	}
	var frags []lancetable.Fragment
	var schema *lancefile.Schema
	seen := make(map[string]bool)
	for _, d := range ds {
		if schema == nil {
			schema = d.Schema
		}
		for _, f := range d.Fragments {
			if !seen[f.Path] {
				seen[f.Path] = true
				frags = append(frags, f.lance())
			}
		}
	}
	var patch *indexPatch
	if st := w.stages.Forget(ctx, key, w.log); st != nil {
		patch = st.patch
	}
	lostCreate := false // a previous attempt lost the race to create the dataset
	loop := tablesink.Commit{Sink: "lance", Endpoint: w.env.Endpoint, Key: key, MaxReplans: maxReplans,
		Commits: w.m.commits, Conflicts: w.m.conflicts, Log: w.log}
	info, err := loop.Loop(ctx, func(ctx context.Context, replan int) (writers.CommitInfo, tablesink.Result, error) {
		defer w.pins.Publishing()() // from reading the latest version to publishing the next
		d, err := w.latest(ctx)
		if err != nil {
			return writers.CommitInfo{}, 0, err
		}
		if len(frags) == 0 && (m == nil || len(m.Updated)+len(m.Removed) == 0) && (key.Auto && len(seqs) == 0 || d == nil && schema == nil) {
			// Nothing to publish and no epoch to record (auto-commit), or
			// no dataset to record it in and no schema to create one with.
			if d == nil {
				return writers.CommitInfo{Version: writers.NoVersion}, tablesink.Uncounted, nil
			}
			return writers.CommitInfo{Version: int64(d.Version())}, tablesink.Uncounted, nil
		}
		if !key.Auto {
			c, ok, err := w.hist.lookup(ctx, w.bucket, d, key.Writer)
			if err != nil {
				return writers.CommitInfo{}, 0, err
			}
			if ok && c.epoch >= key.Epoch {
				return writers.CommitInfo{Version: c.version, Replayed: true}, tablesink.Replayed, nil
			}
		}
		if info, done, err := w.seqsReplayed(ctx, d, seqs); err != nil || done {
			return info, tablesink.Replayed, err
		}
		if replan == 0 { // once, after the replay check: a replay publishes nothing
			if err := w.verifyFiles(ctx, ds); err != nil {
				return writers.CommitInfo{}, 0, err
			}
		}
		txn := &lancetable.Transaction{Op: lancetable.OpAppend, Fragments: frags}
		if m != nil {
			if err := m.apply(d, txn); err != nil {
				return writers.CommitInfo{}, 0, tablesink.Final(err)
			}
		}
		if !key.Auto {
			txn.Properties = map[string]string{propWriter: key.Writer, propEpoch: strconv.FormatInt(key.Epoch, 10)}
		}
		if len(seqs) > 0 {
			txn.Properties = map[string]string{propSeqs: seqsProperty(seqs)}
		}
		txn.Concurrent = concurrentRecords(key, seqs)
		if d == nil {
			txn.Op, txn.Schema = lancetable.OpOverwrite, schema
		} else if schema != nil && len(frags) > 0 && !schema.Equal(&d.Manifest.Schema) {
			return writers.CommitInfo{}, 0, writers.Errorf(writers.ErrInvalid, "lance: the descriptors' data files were written for another schema than the dataset's (%s), which %s: replay the transaction with the dataset's columns", fieldList(&d.Manifest.Schema), changedBy(lostCreate))
		}
		if d != nil {
			if err := sameFormat(d, frags, lostCreate); err != nil {
				return writers.CommitInfo{}, 0, err
			}
		}
		nd, err := lancetable.Commit(ctx, w.bucket, d, txn)
		if err != nil {
			lostCreate = d == nil
			return writers.CommitInfo{}, 0, err
		}
		if d != nil && nd.Version() > d.Version()+1 {
			w.m.rebases.Inc() // lost the race; lancetable rebased it
		}
		w.m.version.Set(float64(nd.Version()))
		if m != nil {
			w.m.countMerge(m.Counts)
			if patch != nil && !patch.matches(m, frags) {
				patch = nil
			}
			w.patchIndex(patch, nd)
		}
		return writers.CommitInfo{Version: int64(nd.Version())}, tablesink.Committed, nil
	})
	if err == nil {
		w.pins.Unpin(key) // a failed commit is retried or rolled back
	}
	return info, err
}

// sameFormat refuses data files of another Lance file format than the
// dataset's (written for the format configured for a new dataset while
// another writer created it in another one): Lance datasets never mix
// file formats. A replay writes them again, in the dataset's format.
func sameFormat(d *lancetable.Dataset, frags []lancetable.Fragment, lostCreate bool) error {
	minor, err := d.FileMinor()
	if err != nil {
		return err
	}
	for _, f := range frags {
		for _, df := range f.Files {
			if df.Major != 2 || df.Minor != uint32(minor) {
				return writers.Errorf(writers.ErrInvalid, "lance: the transaction's data files are in Lance file format %d.%d, the dataset's in 2.%d, which %s; a dataset never mixes file formats: replay the transaction, which writes its files in the dataset's format", df.Major, df.Minor, minor, changedBy(lostCreate))
			}
		}
	}
	return nil
}

// changedBy says how the dataset came to have another schema than the
// descriptors' files.
func changedBy(lostCreate bool) string {
	if lostCreate {
		return "another writer's first commit created meanwhile"
	}
	return "changed since the precommit"
}

// fieldList formats a Lance schema's columns for messages.
func fieldList(s *lancefile.Schema) string {
	as, err := s.ToArrow()
	if err != nil {
		return "unreadable"
	}
	return writers.FieldList(as)
}

// patchIndex brings the key index to nd, the version a merge committed:
// from the merge's own patch p when it applies (see keyIndex.apply), else
// by syncing it to nd (building it, when the merge found its targets by
// scanning a cold index). It takes idxMu now and works in the background,
// releasing it when done: the commit is acknowledged without waiting (the
// work overlaps with the next transaction's data arriving), and the next
// merge's planning, which takes idxMu, finds the index current. Close
// cancels a build and waits.
func (w *Writer) patchIndex(p *indexPatch, nd *lancetable.Dataset) {
	if w.cfg.KeyIndexMaxBytes <= 0 {
		return // no index: merges scan, and the commit need not wait for idxMu
	}
	// Under the stages' lock: Close, having closed them, waits for it.
	if !w.stages.IfOpen(func() { w.patching.Add(1) }) {
		return
	}
	w.idxMu.Lock()
	go func() {
		defer w.patching.Done()
		defer w.idxMu.Unlock()
		applied, err := w.applyPatch(p, nd)
		switch {
		case err != nil:
			w.log.Error("lance: patching the key index failed; the next merge rebuilds it", "err", err, "stack", writers.PanicStack(err))
		case applied:
			w.m.indexSyncs.WithLabelValues("committed").Inc()
		case w.idx != nil:
			if err := w.buildIndex(nd); err != nil {
				w.log.Warn("lance: building the key index failed; the next merge scans and builds it again", "err", err)
			}
		}
	}()
}

// buildIndex syncs the key index to nd on the background goroutine, with
// a panic (an unreadable fragment) its error.
func (w *Writer) buildIndex(nd *lancetable.Dataset) (err error) {
	defer func() {
		if err != nil && w.idx != nil {
			*w.idx = *newKeyIndex()
		}
	}()
	defer writers.Recover(&err)
	return w.syncIndex(w.background, nd, w.allocator())
}

// applyPatch applies p to the index on the patch goroutine, which gRPC's
// recovery does not cover: a panic empties the index (the next sync
// rebuilds it) and is returned instead of ending the process.
func (w *Writer) applyPatch(p *indexPatch, nd *lancetable.Dataset) (applied bool, err error) {
	defer func() {
		if err != nil && w.idx != nil {
			*w.idx = *newKeyIndex()
		}
	}()
	defer writers.Recover(&err)
	return p != nil && w.idx != nil && w.idx.apply(p, nd, int(w.cfg.KeyIndexMaxBytes)), nil
}

// decodeDescriptors decodes descs and checks them against the endpoint's
// mode; m is the merge they carry, if any.
func (w *Writer) decodeDescriptors(descs []writers.Descriptor) (ds []*descriptor, m *mergeDesc, err error) {
	if ds, err = writers.DecodeDescriptors(w.env.Endpoint, descs, decodeDescriptor); err != nil {
		return nil, nil, err
	}
	if err := w.checkModes(ds); err != nil {
		return nil, nil, err
	}
	if m, err = mergeOf(ds); err != nil {
		return nil, nil, err
	}
	return ds, m, nil
}

// CheckDescriptors checks descriptors handed over from other servers as
// Commit does before it publishes anything (writers.DescriptorChecker): a
// replayed key publishes nothing and passes.
func (w *Writer) CheckDescriptors(ctx context.Context, key writers.TxnKey, descs []writers.Descriptor) error {
	ds, _, err := w.decodeDescriptors(descs)
	if err != nil {
		return err
	}
	d, err := w.latest(ctx)
	if err != nil {
		return err
	}
	if !key.Auto && d != nil {
		c, ok, err := w.hist.lookup(ctx, w.bucket, d, key.Writer)
		if err != nil {
			return err
		}
		if ok && c.epoch >= key.Epoch {
			return nil
		}
	}
	return w.verifyFiles(ctx, ds)
}
