package kafka

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/quiver-ingest/quiver/writers"
)

// maxTxnProducers bounds the transactional producers kept between commits,
// one per writer: each holds broker connections and goroutines. Beyond it
// the least recently used idle one is closed, and its writer's next commit
// starts a new producer and reads the marker topic again.
const maxTxnProducers = 16

// txnSlot is one writer's transactional producer on this endpoint and
// what it knows of the writer's committed epoch.
type txnSlot struct {
	mu sync.Mutex // held for a whole commit; guards the fields up to users
	p  *pipe      // nil before the first commit and after a failure
	// known: epoch and found hold the writer's committed epoch, valid
	// while p lives (commitAttempt says why).
	known bool
	epoch int64
	found bool

	// Guarded by Writer.mu.
	users   int // commits holding or waiting for mu
	lastUse time.Time
}

// acquireTxn returns writer's slot, locked for one commit.
func (w *Writer) acquireTxn(writer string) (*txnSlot, error) {
	w.mu.Lock()
	if w.closed || !w.opened {
		w.mu.Unlock()
		return nil, w.notOpen()
	}
	s := w.txns[writer]
	if s == nil {
		s = &txnSlot{}
		w.txns[writer] = s
	}
	s.users++
	w.mu.Unlock()
	s.mu.Lock()
	// Close may have run while this commit waited for the slot.
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		w.releaseTxn(s)
		return nil, w.notOpen()
	}
	return s, nil
}

// releaseTxn unlocks s and closes the producers of the least recently used
// idle slots beyond maxTxnProducers.
func (w *Writer) releaseTxn(s *txnSlot) {
	s.mu.Unlock()
	w.mu.Lock()
	s.users--
	s.lastUse = time.Now()
	var evicted []*txnSlot
	for len(w.txns) > maxTxnProducers {
		writer, oldest := "", (*txnSlot)(nil)
		for name, c := range w.txns {
			if c.users == 0 && (oldest == nil || c.lastUse.Before(oldest.lastUse)) {
				writer, oldest = name, c
			}
		}
		if oldest == nil {
			break // all busy: trimmed by a later release
		}
		delete(w.txns, writer)
		evicted = append(evicted, oldest)
	}
	w.mu.Unlock()
	// Unreachable from the map and unused, so nobody holds or waits for
	// their locks.
	for _, e := range evicted {
		e.mu.Lock()
		w.dropProducer(context.Background(), e)
		e.mu.Unlock()
	}
}

// dropProducer closes s's producer (s locked) and forgets the cached epoch
// with it.
func (w *Writer) dropProducer(ctx context.Context, s *txnSlot) {
	s.known = false
	if s.p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryWait)
	defer cancel()
	if err := s.p.close(ctx); err != nil {
		w.log.Warn("kafka sink: transactional producer did not close cleanly", "err", err)
	}
	s.p = nil
}

// closeTxns closes every kept transactional producer, waiting for commits
// in flight. Called by Close after it marked the writer closed.
func (w *Writer) closeTxns(ctx context.Context) {
	w.mu.Lock()
	slots := slices.Collect(maps.Values(w.txns))
	w.txns = map[string]*txnSlot{}
	w.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		w.dropProducer(ctx, s)
		s.mu.Unlock()
	}
}

func (w *Writer) notOpen() error {
	return writers.Errorf(writers.ErrWrongState, "kafka: endpoint %q: writer is not open", w.env.Endpoint)
}
