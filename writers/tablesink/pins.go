package tablesink

import (
	"context"
	"sync"

	"github.com/quiver-ingest/quiver/writers"
)

// Pins keep a table's optimize away from the files (Delta) or fragments
// (Lance), identified by ID, that a precommitted transaction of this
// process planned against: that transaction's commit fails if a
// compaction rewrote one of them meanwhile, and once it is decided (on
// several endpoints, some perhaps published already) it must still
// publish. A transaction plans between BeginPlan and EndPlan, which pins
// what it read until Unpin (its Commit succeeded or its key was rolled
// back); optimize commits through Commit, which waits for every plan
// under way to end and holds new ones off until it returns, so a plan
// either saw the version before the compaction (and its pins are seen)
// or the version after it.
//
// One Pins is shared by every writer of the process on one storage
// location (AcquirePins): two endpoints may write one table. It also
// keeps the process's vacuum from deleting a version a commit is about
// to build on (Publishing, Vacuuming).
// Transactions precommitted by another process are not seen.
type Pins[ID comparable] struct {
	mu sync.Mutex
	// changed is closed (and replaced) whenever planning or committing
	// changes: the waiters of waitLocked look again.
	changed    chan struct{}
	planning   int  // plans under way
	committing bool // a Commit waits for plans to end or runs: new plans wait
	pins       map[writers.TxnKey][]ID

	// versions is held shared by commits (Publishing) and exclusively by
	// a vacuum deleting versions (Vacuuming).
	versions sync.RWMutex
}

func newPins[ID comparable]() *Pins[ID] {
	return &Pins[ID]{changed: make(chan struct{}), pins: map[writers.TxnKey][]ID{}}
}

// waitLocked waits, releasing p.mu meanwhile, until ready holds or ctx
// ends.
func (p *Pins[ID]) waitLocked(ctx context.Context, ready func() bool) error {
	for !ready() {
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			return ctx.Err()
		}
		p.mu.Lock()
	}
	return nil
}

func (p *Pins[ID]) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// BeginPlan marks a transaction being planned, once no optimize commits;
// EndPlan must follow unless it returns an error (ctx's).
func (p *Pins[ID]) BeginPlan(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.waitLocked(ctx, func() bool { return !p.committing }); err != nil {
		return err
	}
	p.planning++
	return nil
}

// EndPlan ends a plan, pinning ids for key (in addition to what key
// pinned already).
func (p *Pins[ID]) EndPlan(key writers.TxnKey, ids []ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.planning--
	if len(ids) > 0 {
		p.pins[key] = append(p.pins[key], ids...)
	}
	if p.planning == 0 {
		p.broadcastLocked()
	}
}

// Pin pins ids for key, planned earlier (a transaction recovered after a
// restart): it waits for an optimize committing to finish.
func (p *Pins[ID]) Pin(key writers.TxnKey, ids []ID) {
	if p.BeginPlan(context.Background()) == nil {
		p.EndPlan(key, ids)
	}
}

// Unpin forgets key's pins.
func (p *Pins[ID]) Unpin(key writers.TxnKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pins, key)
}

// Pinned returns the set of pinned ids.
func (p *Pins[ID]) Pinned() map[ID]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pinnedLocked()
}

func (p *Pins[ID]) pinnedLocked() map[ID]bool {
	set := map[ID]bool{}
	for _, ids := range p.pins {
		for _, id := range ids {
			set[id] = true
		}
	}
	return set
}

// Commit runs fn (an optimize's commit) with the pinned ids once no
// transaction is being planned; new plans wait from the moment Commit
// starts waiting (so a stream of plans cannot starve it) until fn
// returns. fn runs without p's lock: Unpin goes on meanwhile. Commit
// returns ctx.Err() if ctx ends before fn could run.
func (p *Pins[ID]) Commit(ctx context.Context, fn func(pinned map[ID]bool) error) error {
	p.mu.Lock()
	// One Commit at a time: a second waits for the first to end.
	if err := p.waitLocked(ctx, func() bool { return !p.committing }); err != nil {
		p.mu.Unlock()
		return err
	}
	p.committing = true
	err := p.waitLocked(ctx, func() bool { return p.planning == 0 })
	var pinned map[ID]bool
	if err == nil {
		pinned = p.pinnedLocked()
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.committing = false
		p.broadcastLocked()
		p.mu.Unlock()
	}()
	if err != nil {
		return err
	}
	return fn(pinned)
}

// Publishing holds off vacuum's deletion of versions (Vacuuming) until
// done is called. A commit holds it from reading the table's latest
// version until it has published the next one: a conditional write of a
// version number a vacuum freed meanwhile would succeed, acknowledging
// one number twice and hiding the new version behind newer ones. Calls
// must not nest (a vacuum waiting in between would deadlock them).
func (p *Pins[ID]) Publishing() (done func()) {
	p.versions.RLock()
	return p.versions.RUnlock
}

// Vacuuming waits for the commits holding Publishing to publish, and
// holds new ones off until done is called: a vacuum deletes versions
// (never the latest it planned against, nor newer ones) in between.
func (p *Pins[ID]) Vacuuming() (done func()) {
	p.versions.Lock()
	return p.versions.Unlock
}

// pinsKey names one table of the process: the sink and the canonical
// URI of its storage root.
type pinsKey struct{ sink, uri string }

type sharedPins struct {
	pins any // *Pins[ID]
	refs int
}

// registry holds the Pins of every table some writer of the process has
// open: process-wide because endpoints (writers) sharing a table must
// share its pins.
var registry struct {
	sync.Mutex
	m map[pinsKey]*sharedPins
}

// AcquirePins returns the Pins of the table at uri (a storage.Bucket's
// canonical URI) for sink, shared by every writer of the process that
// acquired it and not yet released; release must be called once (the
// writer's Close).
func AcquirePins[ID comparable](sink, uri string) (_ *Pins[ID], release func()) {
	k := pinsKey{sink, uri}
	registry.Lock()
	defer registry.Unlock()
	if registry.m == nil {
		registry.m = map[pinsKey]*sharedPins{}
	}
	s := registry.m[k]
	if s == nil {
		s = &sharedPins{pins: newPins[ID]()}
		registry.m[k] = s
	}
	s.refs++
	var once sync.Once
	return s.pins.(*Pins[ID]), func() {
		once.Do(func() {
			registry.Lock()
			defer registry.Unlock()
			if s.refs--; s.refs == 0 {
				delete(registry.m, k)
			}
		})
	}
}
