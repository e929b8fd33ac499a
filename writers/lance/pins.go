package lance

import (
	"github.com/quiver-ingest/quiver/writers"
)

// A precommitted merge_insert publishes an Update whose deletion files
// address rows of the fragments it touched, so its Commit fails if a
// compaction rewrote one of them meanwhile. A merge therefore plans
// between w.pins.BeginPlan and EndPlan, pinning the fragments it touched
// from Precommit until its Commit succeeds or its key is rolled back, and
// optimize commits through w.pins.Commit and never rewrites a pinned
// fragment (tablesink.Pins). The pins are shared by every writer of this
// process on the dataset; after a restart the coordinator hands the
// writer the merges it recovered (KeepPrecommitted), which pins them
// again. Merges precommitted by another process are not pinned
// (docs/lance.md, "Maintenance").

// KeepPrecommitted pins the fragments the merges among descs, precommitted
// under key before this writer opened, touched (writers.PrecommitKeeper).
// Descriptors that do not decode are left to Commit to refuse.
func (w *Writer) KeepPrecommitted(key writers.TxnKey, descs []writers.Descriptor) {
	if w.cfg.WriteMode != ModeMergeInsert || w.pins == nil {
		return
	}
	_, m, err := w.decodeDescriptors(descs)
	if err != nil || m == nil {
		return
	}
	w.pins.Pin(key, m.touchedIDs())
}

// touchedIDs lists the existing fragments m changes or removes.
func (m *mergeDesc) touchedIDs() []uint64 {
	ids := make([]uint64, 0, len(m.Updated)+len(m.Removed))
	for _, u := range m.Updated {
		ids = append(ids, u.ID)
	}
	for _, r := range m.Removed {
		ids = append(ids, r.ID)
	}
	return ids
}
