package lance

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/tablesink"
)

// Transaction properties recording a transactional commit, and the
// continuous-stream writers' last seqs a group commit publishes (a JSON
// object, writer → seq).
const (
	propWriter = "quiver.writer"
	propEpoch  = "quiver.epoch"
	propSeqs   = "quiver.seqs"
)

// committedAt is a writer's highest committed epoch and the version that
// recorded it.
type committedAt struct{ epoch, version int64 }

// history caches what the version history says about committed epochs:
// every version up to scanned has been read. Versions are immutable, so
// later scans read only the new ones.
type history struct {
	mu      sync.Mutex // guards the following fields; held during a scan
	scanned uint64
	epochs  map[string]committedAt
}

// lookup returns writer's committed epoch as of dataset version d, reading
// the transactions of versions not scanned yet, newest first. Only the
// versions that exist are read: one listing names them (a vacuum leaves
// long gaps, which must not cost a read per missing number); a commit
// right after the last scan reads d alone. A writer whose epoch's version
// a vacuum removed (see Vacuum: only writers idle for longer than a
// transaction may stay open and than the retention) is unknown
// afterwards.
func (h *history) lookup(ctx context.Context, b *storage.Bucket, d *lancetable.Dataset, writer string) (committedAt, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d == nil || d.Version() <= h.scanned {
		c, ok := h.epochs[writer]
		return c, ok, nil
	}
	versions := []uint64{d.Version()}
	if d.Version() > h.scanned+1 {
		all, _, err := lancetable.Versions(ctx, b)
		if err != nil {
			return committedAt{}, false, err
		}
		versions = versions[:0]
		for _, v := range all {
			if v > h.scanned && v <= d.Version() {
				versions = append(versions, v)
			}
		}
		slices.Sort(versions)
		slices.Reverse(versions)
	}
	for _, v := range versions {
		if err := h.read(ctx, b, d, v); err != nil {
			return committedAt{}, false, err
		}
	}
	h.scanned = d.Version()
	c, ok := h.epochs[writer]
	return c, ok, nil
}

// read records the epoch version v's transaction commits, if any; d is
// the latest version, v at most d's. A version removed since it was
// listed is skipped.
func (h *history) read(ctx context.Context, b *storage.Bucket, d *lancetable.Dataset, v uint64) error {
	dv := d
	if v != d.Version() {
		var err error
		if dv, err = lancetable.LoadVersion(ctx, b, v, d.Naming); errors.Is(err, storage.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
	}
	txn, err := dv.Transaction(ctx, b)
	if err != nil && !errors.Is(err, storage.ErrNotExist) {
		return err
	}
	if txn == nil {
		return nil
	}
	for w, epoch := range recordedEpochs(txn.Properties) {
		h.note(w, epoch, v)
	}
	return nil
}

// recordedEpochs returns the epochs (and continuous streams' seqs) a
// version's transaction properties record, by writer; none for a version
// Quiver did not commit.
func recordedEpochs(props map[string]string) map[string]int64 {
	if seqs := props[propSeqs]; seqs != "" {
		var m map[string]int64
		if json.Unmarshal([]byte(seqs), &m) != nil {
			return nil
		}
		return m
	}
	if props[propWriter] == "" {
		return nil
	}
	epoch, err := strconv.ParseInt(props[propEpoch], 10, 64)
	if err != nil {
		return nil
	}
	return map[string]int64{props[propWriter]: epoch}
}

// concurrentRecords is the lancetable.Transaction.Concurrent rule of a
// commit recording key's epoch (unless key.Auto) or seqs: a version
// committed concurrently that records one of the same writers at that
// epoch, or at one of those seqs, or later, is a conflict, so that the
// commit plans again and its replay check sees that version (two servers
// committing the same epoch, or the same stream writer's seqs, publish
// once).
func concurrentRecords(key writers.TxnKey, seqs []writers.WriterSeq) func(*lancetable.Transaction) error {
	if key.Auto && len(seqs) == 0 {
		return nil
	}
	return func(other *lancetable.Transaction) error {
		recorded := recordedEpochs(other.Properties)
		if e, ok := recorded[key.Writer]; ok && !key.Auto && e >= key.Epoch {
			return writers.Errorf(writers.ErrConflict, "it committed epoch %d of writer %q", e, key.Writer)
		}
		for _, s := range seqs {
			if e, ok := recorded[s.Writer]; ok && e >= s.First {
				return writers.Errorf(writers.ErrConflict, "it committed seq %d of stream writer %q", e, s.Writer)
			}
		}
		return nil
	}
}

// note records that version v committed epoch of writer.
func (h *history) note(writer string, epoch int64, v uint64) {
	if c, ok := h.epochs[writer]; !ok || epoch > c.epoch {
		h.epochs[writer] = committedAt{epoch: epoch, version: int64(v)}
	}
}

// seqsProperty is the quiver.seqs property of a group commit.
func seqsProperty(seqs []writers.WriterSeq) string {
	m := make(map[string]int64, len(seqs))
	for _, s := range seqs {
		m[s.Writer] = s.Last
	}
	b, _ := json.Marshal(m) // a map of strings to ints always encodes
	return string(b)
}

// seqsReplayed checks a group commit's seqs against the history as of d
// (writers.SeqsState): done, with the version that recorded them, when
// every writer is recorded at its last seq or later.
func (w *Writer) seqsReplayed(ctx context.Context, d *lancetable.Dataset, seqs []writers.WriterSeq) (writers.CommitInfo, bool, error) {
	if len(seqs) == 0 || d == nil {
		return writers.CommitInfo{}, false, nil
	}
	recorded := make(map[string]committedAt, len(seqs))
	for _, s := range seqs {
		c, ok, err := w.hist.lookup(ctx, w.bucket, d, s.Writer)
		if err != nil {
			return writers.CommitInfo{}, false, err
		}
		if ok {
			recorded[s.Writer] = c
		}
	}
	done, err := writers.SeqsState(seqs, func(writer string) (int64, bool) {
		c, ok := recorded[writer]
		return c.epoch, ok
	})
	if err != nil {
		return writers.CommitInfo{}, false, tablesink.Final(err)
	}
	if !done {
		return writers.CommitInfo{}, false, nil
	}
	return writers.CommitInfo{Version: recorded[seqs[len(seqs)-1].Writer].version, Replayed: true}, true, nil
}

// records returns the versions that hold some writer's newest committed
// epoch, as of the last lookup: a vacuum keeps the recent ones.
func (h *history) records() map[uint64]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[uint64]bool, len(h.epochs))
	for _, c := range h.epochs {
		out[uint64(c.version)] = true
	}
	return out
}

// forget drops the epochs recorded by versions a vacuum removed, so that
// this process answers as a fresh one would, and one-off writers do not
// accumulate.
func (h *history) forget(removed []uint64) {
	gone := make(map[int64]bool, len(removed))
	for _, v := range removed {
		gone[int64(v)] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	maps.DeleteFunc(h.epochs, func(_ string, c committedAt) bool { return gone[c.version] })
}

// CommittedEpoch returns the highest epoch writer committed, read from the
// transaction properties of the dataset's versions.
func (w *Writer) CommittedEpoch(ctx context.Context, writer string) (int64, bool, error) {
	d, err := w.latest(ctx)
	if err != nil || d == nil {
		return 0, false, err
	}
	c, ok, err := w.hist.lookup(ctx, w.bucket, d, writer)
	return c.epoch, ok, err
}
