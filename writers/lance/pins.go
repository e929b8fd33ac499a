package lance

import (
	"sync"

	"github.com/quiver-ingest/quiver/writers"
)

// compactionGate keeps optimize away from the fragments a merge_insert
// of this server planned against. A precommitted merge publishes an
// Update whose deletion files address rows of the fragments it touched,
// so its Commit fails if a compaction rewrote one of them meanwhile; once
// its transaction is decided (on several endpoints, some perhaps
// published already) it must still publish. A merge therefore pins the
// fragments it touched from Precommit until its Commit succeeds or its
// key is rolled back, and optimize never rewrites a pinned fragment.
// Optimize commits under the gate's lock, after every merge being planned
// has finished planning (and pinned): a merge plans either on a version
// before the compaction (and its pins are seen) or after it. After a
// restart the coordinator hands the writer the merges it recovered
// (KeepPrecommitted), which pins them again; merges precommitted on
// another server are not pinned (docs/lance.md, "Maintenance").
type compactionGate struct {
	mu       sync.Mutex
	idle     sync.Cond // signalled when planning drops to 0
	planning int       // merges being planned
	pins     map[writers.TxnKey][]uint64
}

func newCompactionGate() *compactionGate {
	g := &compactionGate{pins: map[writers.TxnKey][]uint64{}}
	g.idle.L = &g.mu
	return g
}

// beginPlan marks a merge being planned; endPlan must follow.
func (g *compactionGate) beginPlan() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.planning++
}

// endPlan ends a merge's planning, pinning the fragments of touched for
// key (in addition to what an earlier Precommit of key pinned).
func (g *compactionGate) endPlan(key writers.TxnKey, touched []uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.planning--
	g.pinLocked(key, touched)
	if g.planning == 0 {
		g.idle.Broadcast()
	}
}

// pin pins the fragments of touched for key, in addition to what key
// pinned already.
func (g *compactionGate) pin(key writers.TxnKey, touched []uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pinLocked(key, touched)
}

func (g *compactionGate) pinLocked(key writers.TxnKey, touched []uint64) {
	if len(touched) > 0 {
		g.pins[key] = append(g.pins[key], touched...)
	}
}

// KeepPrecommitted pins the fragments the merges among descs, precommitted
// under key before this writer opened, touched (writers.PrecommitKeeper).
// Descriptors that do not decode are left to Commit to refuse.
func (w *Writer) KeepPrecommitted(key writers.TxnKey, descs []writers.Descriptor) {
	if w.cfg.WriteMode != ModeMergeInsert {
		return
	}
	_, m, err := w.decodeDescriptors(descs)
	if err != nil || m == nil {
		return
	}
	w.gate.pin(key, m.touchedIDs())
}

// unpin forgets key's pins.
func (g *compactionGate) unpin(key writers.TxnKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pins, key)
}

// pinned returns the set of pinned fragment ids.
func (g *compactionGate) pinned() map[uint64]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pinnedLocked()
}

func (g *compactionGate) pinnedLocked() map[uint64]bool {
	set := map[uint64]bool{}
	for _, ids := range g.pins {
		for _, id := range ids {
			set[id] = true
		}
	}
	return set
}

// commit runs fn (optimize's commit) once no merge is being planned,
// with the pinned fragments, holding off new plans until it returns.
func (g *compactionGate) commit(fn func(pinned map[uint64]bool) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.planning > 0 {
		g.idle.Wait()
	}
	return fn(g.pinnedLocked())
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
