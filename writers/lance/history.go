package lance

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/quiver-ingest/quiver/writers/lance/lanceformat"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// Transaction properties recording a transactional commit.
const (
	propWriter = "quiver.writer"
	propEpoch  = "quiver.epoch"
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
// the transactions of versions not scanned yet, newest first. Versions
// removed by a cleanup are skipped: Quiver's vacuum keeps the version
// holding each writer's newest epoch (records), so epochs survive it; a
// cleanup by another tool may remove them, and older epochs are then
// unknown.
func (h *history) lookup(ctx context.Context, b *storage.Bucket, d *lanceformat.Dataset, writer string) (committedAt, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d != nil && d.Version() > h.scanned {
		for v := d.Version(); v > h.scanned; v-- {
			dv := d
			if v != d.Version() {
				var err error
				if dv, err = lanceformat.LoadVersion(ctx, b, v, d.Naming); errors.Is(err, storage.ErrNotExist) {
					continue
				} else if err != nil {
					return committedAt{}, false, err
				}
			}
			txn, err := dv.Transaction(ctx, b)
			if errors.Is(err, storage.ErrNotExist) {
				continue
			}
			if err != nil {
				return committedAt{}, false, err
			}
			if txn == nil || txn.Properties[propWriter] == "" {
				continue
			}
			epoch, err := strconv.ParseInt(txn.Properties[propEpoch], 10, 64)
			if err != nil {
				continue // not a Quiver commit
			}
			w := txn.Properties[propWriter]
			if c, ok := h.epochs[w]; !ok || epoch > c.epoch {
				h.epochs[w] = committedAt{epoch: epoch, version: int64(v)}
			}
		}
		h.scanned = d.Version()
	}
	c, ok := h.epochs[writer]
	return c, ok, nil
}

// records returns the versions that hold some writer's newest committed
// epoch, as of the last lookup: a vacuum must keep them.
func (h *history) records() map[uint64]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[uint64]bool, len(h.epochs))
	for _, c := range h.epochs {
		out[uint64(c.version)] = true
	}
	return out
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
