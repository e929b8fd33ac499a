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
	// Busy counts the keys of the writer whose encoders run: a key that
	// starts while others encode takes only the cores left.
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
// Memory: queued parts (writers.MemoryQueued) and what the files buffer
// (writers.MemoryEncoder) are held on the server's memory budget; under
// pressure the files flush what they buffer after each part instead of
// letting it grow.
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

	mu  sync.Mutex // guards err
	err error      // first encoding or upload failure
}

// encoder is one goroutine's queue and files; files belong to the
// goroutine until the pool's WaitGroup is done.
type encoder[F File[R], R any] struct {
	in    chan job
	files *Files[F, R]
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

// NewPool starts the encoders of a key of sink.
//
// Every encoder keeps a file writer slot (its files' base, see
// Files.slot): the first waits for one (up to limits.admission_timeout,
// before the key holds anything), the others exist only if a slot is
// free, so that a key's own encoders never wait for slots their siblings
// hold.
func NewPool[F File[R], R any](ctx context.Context, sink string, budget writers.MemoryCharger, pool Pool, create Create[F], encode Encode[F, R]) (*Staged[F, R], error) {
	first, err := budget.OpenFile(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: open a data file: %w", sink, err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	p := &Staged[F, R]{sink: sink, budget: budget, encode: encode, busy: pool.Busy, ctx: pctx, cancel: cancel}
	// Other keys encoding at the same time already share the cores.
	n := min(runtime.GOMAXPROCS(0), pool.Max) - int(p.busy.Add(1)-1)
	for i := range max(n, 1) {
		base, ok := first, true
		if i > 0 {
			base, ok = budget.TryOpenFile()
		}
		if !ok {
			break
		}
		e := &encoder[F, R]{in: make(chan job, 1), files: NewFiles[F, R](sink, budget, create)}
		e.files.charge = true
		e.files.base = base
		p.workers = append(p.workers, e)
		p.wg.Go(func() { p.run(e) })
	}
	return p, nil
}

// Open returns the open file of dir of an inline Staged.
func (p *Staged[F, R]) Open(dir string) (F, bool) {
	return p.inline.Open(dir)
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
	if p.inline != nil {
		defer part.Rec.Release()
		return p.encodeInto(ctx, p.inline, part)
	}
	if err := p.Failed(); err != nil {
		// The key has failed already: do not charge and queue rows its
		// encoders would only drop.
		part.Rec.Release()
		return err
	}
	e := p.workers[p.next]
	p.next = (p.next + 1) % len(p.workers)
	j := job{Part: part, size: util.TotalRecordSize(part.Rec)}
	p.budget.Hold(writers.MemoryQueued, j.size)
	select {
	case e.in <- j:
		return p.Failed()
	case <-ctx.Done():
		j.Rec.Release()
		p.budget.Hold(writers.MemoryQueued, -j.size)
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

// Failed returns the first encoding or upload failure of a pooled
// Staged, if any.
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

// stop closes the queues and waits for the encoders to drain them.
func (p *Staged[F, R]) stop() {
	if p.inline != nil {
		return
	}
	for _, e := range p.workers {
		close(e.in)
	}
	p.wg.Wait()
	p.busy.Add(-1)
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
