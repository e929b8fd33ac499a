// Package membudget is the server's process-wide memory budget
// (limits.memory_bytes): what DoPut streams receive and decode, and what
// sinks buffer on their way out (encoders, staging), is charged to one
// Budget, through one Share per endpoint (limits.endpoint_buffer_bytes).
//
// Two ways to charge, for two kinds of holders. Streams Acquire: they wait,
// first come first served, until the bytes fit both their share and the
// budget, so a full budget stops them reading and gRPC flow control pushes
// back on the client. Sinks Hold: never blocking, because their memory
// drains only if they keep going; they may take the budget over its limit,
// which makes streams wait and tells encoders to flush early (Pressure).
// The package also bounds the open file writers (limits.max_open_files).
package membudget

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/quiver-ingest/quiver/writers"
)

// Kind is what charged bytes are, for the quiver_memory_bytes gauge.
type Kind int

const (
	// Received: FlightData messages read from gRPC, not decoded yet (and
	// the bytes reserved for the next message before it is read).
	Received Kind = iota
	// Decoded: record batches between decoding and the end of their Write.
	Decoded
	// Encoder: what sinks' encoders buffer (writers.MemoryEncoder).
	Encoder
	// Staging: what sinks hold otherwise (writers.MemoryStaging).
	Staging
	// Queued: batches sinks work through on their own
	// (writers.MemoryQueued).
	Queued
	numKinds
)

var kindNames = [numKinds]string{"received", "decoded", "encoder", "staging", "queued"}

func (k Kind) String() string { return kindNames[k] }

// Options configure a Budget.
type Options struct {
	// Limit is the budget in bytes; required.
	Limit int64
	// MaxOpenFiles bounds the file writers open at once; required.
	MaxOpenFiles int64
	// AdmissionTimeout bounds how long Admit and OpenFile wait; required.
	AdmissionTimeout time.Duration
	// ClientFiles bounds the file writers one client's calls take through
	// OpenFile (Quota, WithQuota); 0 means no bound. It also keeps the
	// last 2×ClientFiles slots for OpenFile: TryOpenFile, which cannot
	// tell whose call it serves, leaves them. So whatever one client
	// holds, the others have at least ClientFiles slots. At most
	// MaxOpenFiles/2.
	ClientFiles int64
}

// Budget is the process's memory budget. Its methods are safe for
// concurrent use.
type Budget struct {
	limit     int64
	admission time.Duration
	maxFiles  int64
	// clientFiles is Options.ClientFiles.
	clientFiles int64
	files       *semaphore.Weighted
	openFiles   atomic.Int64
	kinds       [numKinds]atomic.Int64

	mu   sync.Mutex
	used int64
	// streams is the part of used that streams hold (Received, Decoded);
	// queued the part sinks work through on their own (Queued).
	streams, queued int64
	waiters         list.List // of *waiter, in arrival order
	// blocked: the first waiter waits for the budget (not its share).
	blocked bool
}

// waiter is an Acquire waiting; ready is closed once it holds its bytes.
type waiter struct {
	s     *Share
	q     *Quota // nil: none
	kind  Kind
	n     int64
	ready chan struct{}
}

// New returns an empty budget.
func New(opts Options) (*Budget, error) {
	if opts.Limit <= 0 || opts.MaxOpenFiles <= 0 || opts.AdmissionTimeout <= 0 {
		return nil, writers.Errorf(writers.ErrInvalid, "membudget: Limit, MaxOpenFiles and AdmissionTimeout must be positive, got %d, %d, %s", opts.Limit, opts.MaxOpenFiles, opts.AdmissionTimeout)
	}
	if opts.ClientFiles < 0 || 2*opts.ClientFiles > opts.MaxOpenFiles {
		return nil, writers.Errorf(writers.ErrInvalid, "membudget: ClientFiles %d must be from 0 to MaxOpenFiles/2 (%d)", opts.ClientFiles, opts.MaxOpenFiles/2)
	}
	return &Budget{limit: opts.Limit, admission: opts.AdmissionTimeout, maxFiles: opts.MaxOpenFiles, clientFiles: opts.ClientFiles,
		files: semaphore.NewWeighted(opts.MaxOpenFiles)}, nil
}

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Used returns the bytes of kind charged now.
func (b *Budget) Used(k Kind) int64 { return b.kinds[k].Load() }

// OpenFiles returns the open file writers and their bound.
func (b *Budget) OpenFiles() (open, limit int64) { return b.openFiles.Load(), b.maxFiles }

// Share returns a share of the budget capped at limit bytes (the budget's
// own limit when limit is 0 or larger).
func (b *Budget) Share(name string, limit int64) *Share {
	if limit <= 0 || limit > b.limit {
		limit = b.limit
	}
	return &Share{b: b, name: name, limit: limit}
}

// Share is one endpoint's part of a Budget: everything charged through it
// counts against both its limit and the budget's. It implements
// writers.MemoryCharger for the endpoint's sink.
type Share struct {
	b     *Budget
	name  string
	limit int64
	// Guarded by b.mu.
	used    int64
	streams int64 // the part of used that streams hold
	queued  int64 // the part of used queued in the sink (Queued)
	waiting int   // waiters of this share
}

var _ writers.MemoryCharger = (*Share)(nil)

// Limit is the share's cap in bytes.
func (s *Share) Limit() int64 { return s.limit }

// Acquire waits until n bytes of kind fit the share and the budget, then
// charges them; it returns ctx's cause when ctx ends first. n above the
// share's limit waits for the share to be empty, so it still progresses;
// callers refuse such sizes before.
func (s *Share) Acquire(ctx context.Context, k Kind, n int64) error {
	return s.Account(nil).Acquire(ctx, k, n)
}

// ErrFull is the cause of an Admit that timed out.
var ErrFull = errors.New("memory budget full")

// Admit is Acquire for a stream's first bytes: it waits at most the
// admission timeout, then fails with ErrExhausted telling to retry.
func (s *Share) Admit(ctx context.Context, k Kind, n int64) error {
	return s.Account(nil).Admit(ctx, k, n)
}

// Charge charges n bytes of kind without waiting: the holder already has
// them (a message gRPC has read, a batch larger than its estimate).
func (s *Share) Charge(k Kind, n int64) { s.Account(nil).Charge(k, n) }

// Release gives back n bytes of kind and wakes the waiters that now fit.
func (s *Share) Release(k Kind, n int64) { s.Trade(k, n, k, 0) }

// Trade gives back n bytes of kind from and charges m bytes of kind to in
// one step (a received message becoming a decoded batch), without waiting.
func (s *Share) Trade(from Kind, n int64, to Kind, m int64) {
	s.Account(nil).Trade(from, n, to, m)
}

// Hold implements writers.MemoryCharger.
func (s *Share) Hold(kind writers.MemoryKind, delta int64) {
	k := Encoder
	switch kind {
	case writers.MemoryStaging:
		k = Staging
	case writers.MemoryQueued:
		k = Queued
	}
	if delta >= 0 {
		s.Charge(k, delta)
	} else {
		s.Release(k, -delta)
	}
}

// Pressure implements writers.MemoryCharger: what sinks hold fills half
// the budget or half the share. What streams hold does not count: most of
// it is reservations for messages still to come (a stream waiting for its
// client holds one), which flushing encoders would not shrink; counting it
// made every encoder flush tiny row groups whenever streams were idle.
func (s *Share) Pressure() bool {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	return 2*(b.used-b.streams) >= b.limit || 2*(s.used-s.streams) >= s.limit
}

// OpenFile implements writers.MemoryCharger. With a Quota in ctx
// (WithQuota) and Options.ClientFiles, the slot counts against the
// quota's client, which waits while it holds ClientFiles of them.
func (s *Share) OpenFile(ctx context.Context) (func(), error) {
	if release, ok := s.TryOpenFile(); ok {
		return release, nil
	}
	wctx, cancel := context.WithTimeoutCause(ctx, s.b.admission, ErrFull)
	defer cancel()
	q := quotaOf(ctx)
	if s.b.clientFiles == 0 {
		q = nil
	}
	if err := q.takeFile(wctx); err != nil {
		return nil, err
	}
	if err := s.b.files.Acquire(wctx, 1); err != nil {
		q.releaseFile()
		if cause := context.Cause(wctx); errors.Is(cause, ErrFull) {
			return nil, writers.Errorf(writers.ErrExhausted, "all %d file writers (limits.max_open_files) stayed busy for %s (limits.admission_timeout): retry later, or raise limits.max_open_files", s.b.maxFiles, s.b.admission)
		}
		return nil, fmt.Errorf("membudget: wait for a file writer: %w", context.Cause(ctx))
	}
	release := s.b.fileTaken()
	var once sync.Once
	return func() {
		once.Do(func() {
			release()
			q.releaseFile()
		})
	}, nil
}

// TryOpenFile implements writers.MemoryCharger. With Options.ClientFiles
// it leaves the last 2×ClientFiles slots to OpenFile, which counts them
// against their client (checked, then taken: concurrent callers may
// take a few more).
func (s *Share) TryOpenFile() (func(), bool) {
	b := s.b
	if b.clientFiles > 0 && b.maxFiles-b.openFiles.Load() <= 2*b.clientFiles {
		return nil, false
	}
	if !b.files.TryAcquire(1) {
		return nil, false
	}
	return b.fileTaken(), true
}

// fileTaken counts a file slot just acquired and returns its release.
func (b *Budget) fileTaken() func() {
	b.openFiles.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			b.openFiles.Add(-1)
			b.files.Release(1)
		})
	}
}

func (b *Budget) usedNow() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (s *Share) usedNow() int64 {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.used
}

// fitsLocked: n more bytes fit s and the budget. When no stream holds
// anything and sinks have nothing queued, a stream may go over the limit:
// what sinks hold otherwise drains only as streams move on (a file is
// finished when its stream ends), and they flush early under the pressure
// this creates. Queued batches drain on their own: streams wait for them.
func (b *Budget) fitsLocked(s *Share, q *Quota, n int64) bool {
	return b.fitsBudgetLocked(n) && (s.used+n <= s.limit || s.streams == 0 && s.queued == 0) && q.fitsLocked(n)
}

func (b *Budget) fitsBudgetLocked(n int64) bool {
	return b.used+n <= b.limit || b.streams == 0 && b.queued == 0
}

func (b *Budget) takeLocked(s *Share, q *Quota, k Kind, n int64) {
	b.used += n
	s.used += n
	switch k {
	case Received, Decoded:
		b.streams += n
		s.streams += n
		if q != nil {
			q.used += n
		}
	case Queued:
		b.queued += n
		s.queued += n
	}
	b.kinds[k].Add(n)
}

// notifyLocked grants the waiters that fit, in order. A waiter that does
// not fit the budget stops the walk (later, smaller ones must not starve
// it); one that only exceeds its own share or its client's quota is
// passed over, so a full endpoint or a greedy client does not stop the
// others.
func (b *Budget) notifyLocked() {
	b.blocked = false
	for e := b.waiters.Front(); e != nil; {
		w := e.Value.(*waiter)
		next := e.Next()
		switch {
		case !b.fitsBudgetLocked(w.n):
			b.blocked = true
			return
		case b.fitsLocked(w.s, w.q, w.n):
			b.takeLocked(w.s, w.q, w.kind, w.n)
			w.s.waiting--
			b.waiters.Remove(e)
			close(w.ready)
		}
		e = next
	}
}
