package tablesink

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/quiver-ingest/quiver/writers"
)

// Encode writes p's rows (borrowed) into files, typically after mapping
// them to the format's physical columns; nil means files.Write.
type Encode[F File[R], R any] func(ctx context.Context, files *Files[F, R], p Part) error

// Pool configures the encoders of a key's Staged.
type Pool struct {
	// Max caps the encoder goroutines of one key.
	Max int
	// Busy counts the keys of the writer with parts queued for their
	// encoders: a key that starts while others encode takes only the
	// cores left. nil counts the key alone.
	Busy *atomic.Int32
}

// Staged encodes one key's rows into its data files. A pooled Staged
// (NewPool) encodes on up to GOMAXPROCS goroutines (at most Pool.Max),
// each with its own Files, so that a single stream uses every core:
// encoding, not receiving, is what bounds a stream. Keys that start
// while others encode take only the cores left (at least one encoder):
// concurrent streams already use every core, and more encoders would only
// mean more, smaller files. Parts go round-robin to the encoders through
// one-slot queues; rows may land in any of the key's files, which a
// commit of a set of files does not mind. An inline Staged (NewInline)
// encodes on the caller's goroutine, into one Files.
//
// File writer slots (limits.max_open_files): a key holds one for each
// open file and, pooled, one for each encoder with parts to encode (its
// files' base, see Files.slot), so that an encoder never waits for a slot
// its siblings hold. An encoder gives its base back once it has nothing
// queued and no open or rolling file, and gets one again from Send: a
// free one, or, when the key holds none at all, the first that frees up
// (up to limits.admission_timeout). A key between the streams of a
// transaction thus holds slots for its open files (and a file still
// finishing in the background) only.
//
// Memory: queued parts (writers.MemoryQueued) and what the files buffer
// (writers.MemoryEncoder) are held on the server's memory budget; under
// pressure the files flush what they buffer after each part instead of
// letting it grow.
//
// The first encoding or upload failure fails the key: later Sends return
// it, and Finish does not finish the files.
//
// Send is called by the key's Write only; Finish and Abort by its
// Precommit, Rollback or Close, never concurrently with Send.
type Staged[F File[R], R any] struct {
	sink   string
	budget writers.MemoryCharger
	encode Encode[F, R]
	busy   *atomic.Int32

	inline *Files[F, R] // nil when pooled

	ctx     context.Context // cancelled by Abort: encoders drop what is queued
	cancel  context.CancelFunc
	workers []*encoder[F, R]
	next    int
	wg      sync.WaitGroup
	stopped bool

	// slots guards the encoders' pending counts and bases (files.base)
	// and queued.
	slots  sync.Mutex
	queued int // parts sent to the encoders and not yet done

	mu  sync.Mutex // guards err
	err error      // first encoding or upload failure
}

// encoder is one goroutine's queue and files; files belong to the
// goroutine until the pool's WaitGroup is done, except its base, which
// Send gives while the encoder has nothing pending.
type encoder[F File[R], R any] struct {
	in      chan job
	files   *Files[F, R]
	pending int // parts sent to it and not yet done
}

// job is a part for an encoder; it owns Rec, whose size is held on the
// memory budget until it is encoded.
type job struct {
	Part
	size int64
}

// NewInline returns a Staged of sink that encodes on the caller's
// goroutine into files create starts, in slots of budget.
func NewInline[F File[R], R any](sink string, budget writers.MemoryCharger, create Create[F], encode Encode[F, R]) *Staged[F, R] {
	files := NewFiles[F, R](sink, budget, create)
	files.charge = true
	return &Staged[F, R]{sink: sink, budget: budget, encode: encode, inline: files}
}

// NewPool starts the encoders of a key of sink. They hold no file writer
// slot until Send gives them one.
func NewPool[F File[R], R any](sink string, budget writers.MemoryCharger, pool Pool, create Create[F], encode Encode[F, R]) *Staged[F, R] {
	pctx, cancel := context.WithCancel(context.Background())
	busy := pool.Busy
	if busy == nil {
		busy = new(atomic.Int32)
	}
	p := &Staged[F, R]{sink: sink, budget: budget, encode: encode, busy: busy, ctx: pctx, cancel: cancel}
	// Other keys encoding at the same time already share the cores.
	n := min(runtime.GOMAXPROCS(0), pool.Max) - int(busy.Load())
	for range max(n, 1) {
		e := &encoder[F, R]{in: make(chan job, 1), files: NewFiles[F, R](sink, budget, create)}
		e.files.charge = true
		e.files.onRolled = func() {
			p.slots.Lock()
			defer p.slots.Unlock()
			p.releaseIdle(e)
		}
		p.workers = append(p.workers, e)
		p.wg.Go(func() { p.run(e) })
	}
	return p
}

// Open returns the open file of part's partition of an inline Staged.
func (p *Staged[F, R]) Open(part Part) (F, bool) {
	return p.inline.Open(part)
}

// run encodes e's jobs until its queue is closed. After a failure, or
// once the pool is aborted, it only releases what it receives: it must
// keep receiving, or Send would block.
func (p *Staged[F, R]) run(e *encoder[F, R]) {
	for j := range e.in {
		if p.ctx.Err() == nil && p.Failed() == nil {
			if err := p.encodeInto(p.ctx, e.files, j.Part); err != nil {
				p.fail(err)
			}
		}
		j.Rec.Release()
		p.budget.Hold(writers.MemoryQueued, -j.size)
		p.done(e)
	}
}

// route picks the encoder of the next part and counts the part pending
// on it: the next in turn that holds a file writer slot or gets a free
// one. When none holds a slot and none is free, the key holds none, so it
// may wait for one (writers.MemoryCharger.OpenFile).
func (p *Staged[F, R]) route(ctx context.Context) (*encoder[F, R], error) {
	p.slots.Lock()
	defer p.slots.Unlock()
	for i := range p.workers {
		k := (p.next + i) % len(p.workers)
		e := p.workers[k]
		if e.files.base == nil {
			slot, ok := p.budget.TryOpenFile()
			if !ok {
				continue
			}
			e.files.base = slot
		}
		p.next = (k + 1) % len(p.workers)
		return p.take(e), nil
	}
	// Only route gives bases, and it runs on Send's goroutine: none
	// appears while it waits.
	p.slots.Unlock()
	slot, err := p.budget.OpenFile(ctx)
	p.slots.Lock()
	if err != nil {
		return nil, fmt.Errorf("%s: open a data file: %w", p.sink, err)
	}
	e := p.workers[p.next]
	e.files.base = slot
	p.next = (p.next + 1) % len(p.workers)
	return p.take(e), nil
}

// take counts a part pending on e; the key is busy while it has parts
// pending. Called with slots held.
func (p *Staged[F, R]) take(e *encoder[F, R]) *encoder[F, R] {
	e.pending++
	if p.queued++; p.queued == 1 {
		p.busy.Add(1)
	}
	return e
}

// done counts a part of e done (encoded, dropped or never queued); once e
// has nothing pending and no open or rolling file, it gives its base
// back.
func (p *Staged[F, R]) done(e *encoder[F, R]) {
	p.slots.Lock()
	defer p.slots.Unlock()
	e.pending--
	if p.queued--; p.queued == 0 {
		p.busy.Add(-1)
	}
	p.releaseIdle(e)
}

// releaseIdle gives e's base back when e has nothing pending and no open
// or rolling file. Called with slots held: by done, and by e's rolling
// file once finished (e's goroutine, having nothing pending, is idle).
func (p *Staged[F, R]) releaseIdle(e *encoder[F, R]) {
	if e.pending == 0 && len(e.files.open) == 0 && !e.files.Rolling() && e.files.base != nil {
		e.files.base()
		e.files.base = nil
	}
}

// encodeInto writes part into files. A panic (a batch the encoder cannot
// handle) fails the key, not the process: a pool's goroutine is the
// sink's.
func (p *Staged[F, R]) encodeInto(ctx context.Context, files *Files[F, R], part Part) (err error) {
	defer writers.Recover(&err)
	defer files.account()
	if p.encode != nil {
		err = p.encode(ctx, files, part)
	} else {
		err = files.Write(ctx, part)
	}
	if err != nil {
		return err
	}
	return files.relieve()
}

// Send hands part to the encoders. It owns part.Rec, whatever it
// returns. Inline, it encodes part and returns the failure. Pooled, it
// queues part on the next encoder, blocking while it is busy; on ctx's
// end it returns the context's error. Once queued, part.Rec outlives the
// Write that sent it: it is held on the memory budget until encoded, and
// a failure to encode it is returned by a later Send (Failed) or Finish.
func (p *Staged[F, R]) Send(ctx context.Context, part Part) error {
	if err := p.Failed(); err != nil {
		// The key has failed already: do not encode, or charge and queue,
		// rows that would only be dropped.
		part.Rec.Release()
		return err
	}
	if p.inline != nil {
		defer part.Rec.Release()
		if err := p.encodeInto(ctx, p.inline, part); err != nil {
			p.fail(err)
			return err
		}
		return nil
	}
	e, err := p.route(ctx)
	if err != nil {
		part.Rec.Release()
		return err
	}
	j := job{Part: part, size: util.TotalRecordSize(part.Rec)}
	p.budget.Hold(writers.MemoryQueued, j.size)
	select {
	case e.in <- j:
		return p.Failed()
	case <-ctx.Done():
		j.Rec.Release()
		p.budget.Hold(writers.MemoryQueued, -j.size)
		p.done(e)
		return fmt.Errorf("%s: write: %w", p.sink, ctx.Err())
	}
}

func (p *Staged[F, R]) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// Failed returns the first encoding or upload failure, if any.
func (p *Staged[F, R]) Failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// files returns the Files of every encoder.
func (p *Staged[F, R]) files() []*Files[F, R] {
	if p.inline != nil {
		return []*Files[F, R]{p.inline}
	}
	files := make([]*Files[F, R], len(p.workers))
	for i, e := range p.workers {
		files[i] = e.files
	}
	return files
}

// stop closes the queues and waits for the encoders to drain them. Later
// calls do nothing.
func (p *Staged[F, R]) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	for _, e := range p.workers {
		close(e.in)
	}
	p.wg.Wait()
}

// Finish encodes everything queued, finishes every open file and returns
// all finished files. On a failure it abandons the open files and returns
// the finished ones with the error (they are unreferenced: the caller
// deletes them on rollback). The Staged is done.
func (p *Staged[F, R]) Finish() ([]R, error) {
	p.stop()
	if p.cancel != nil {
		defer p.cancel()
	}
	err := p.Failed()
	var done []R
	for _, files := range p.files() {
		if err == nil {
			err = files.FinishAll()
		}
		files.Abort()
		done = append(done, files.Finished...)
	}
	return done, err
}

// Abort drops what is queued, abandons the open files and returns the
// files already finished (for the caller to delete). The Staged is done.
func (p *Staged[F, R]) Abort() []R {
	if p.cancel != nil {
		p.cancel()
	}
	p.stop()
	var done []R
	for _, files := range p.files() {
		files.Abort()
		done = append(done, files.Finished...)
	}
	return done
}
