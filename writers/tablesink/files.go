package tablesink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
)

// MaxOpenFiles bounds the data files one Files keeps open at once (one
// per partition it is writing; a rolled file finishing in the background
// comes on top). Past it every open file is finished, so memory stays
// bounded however many partitions a stream touches.
const MaxOpenFiles = 32

// MemoryEncoder is what an open file buffers in memory (row groups,
// pages), held on the memory budget while it grows.
type MemoryEncoder interface {
	// Buffered is the bytes the encoder holds.
	Buffered() int64
	// Flush writes out what it holds (a row group, pages cut early), so
	// that memory under pressure goes to storage instead of growing.
	Flush() error
}

// File is a format's data file being encoded and uploaded (an Upload),
// R what a finished file becomes in a descriptor (a Delta add action, a
// Lance fragment).
type File[R any] interface {
	MemoryEncoder
	// Name names the file in errors.
	Name() string
	// Write appends rows of the file's schema.
	Write(rec arrow.RecordBatch) error
	// Fits reports whether rec can go into the file: its Arrow schema is
	// the file's (a second stream of a transaction may send, e.g.,
	// dictionary strings instead of plain) and the format takes it (Lance:
	// its dictionaries fit the file's index types). Else the file is
	// finished before rec.
	Fits(rec arrow.RecordBatch) bool
	// Full reports that the file reached its size: it is finished.
	Full() bool
	// Finish writes the footer, publishes the object and returns it,
	// counted in the sink's metrics.
	Finish() (R, error)
	// Abort abandons the file: the object never appears.
	Abort()
}

// Part is rows of one partition of a table (the rows of an unpartitioned
// one): Dir is its directory under the table root ("" or "k=v/", escaped
// for storage), Values its partition values (nil without).
//
// Dir alone does not identify a partition: Hive-style names spell null
// and the string "__HIVE_DEFAULT_PARTITION__" alike, so distinct values
// may share a directory. A file holds the rows of one Dir and one Values.
type Part struct {
	Dir    string
	Values map[string]*string
	Rec    arrow.RecordBatch
}

// Key identifies p's partition: its directory and its values, a null
// value distinct from every string (the empty string included).
func (p Part) Key() string {
	cols := make([]string, 0, len(p.Values))
	for c := range p.Values {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	var b strings.Builder
	b.WriteString(p.Dir)
	for _, c := range cols {
		// Lengths delimit the names and values, so no two tuples share
		// a key whatever bytes they hold.
		fmt.Fprintf(&b, "\x00%d:%s", len(c), c)
		if v := p.Values[c]; v == nil {
			b.WriteString("=null")
		} else {
			fmt.Fprintf(&b, "=%d:%s", len(*v), *v)
		}
	}
	return b.String()
}

// Create starts a file for rows of p (their schema; p.Rec is not
// written) in slot, which the file gives back when it ends, or at once
// when Create fails.
type Create[F any] func(ctx context.Context, p Part, slot func()) (F, error)

// Files is the data files of one encoder: at most one open file per
// partition directory, rolled when Full or before rows it does not Fit,
// and the files it finished. It is used by one goroutine at a time.
//
// A rolled file finishes on a goroutine of its own while the encoder
// goes on with the next one: the file's last pages, footer, fsync and
// publication no longer stall the stream (a Lance stream of 2M rows rolls
// at 1M, and waited about 40 ms for it). One file at a time rolls in the
// background: the next roll, FinishAll and Abort wait for it, and it
// keeps its file writer slot and what it buffered on the budget until
// done. A pooled set's next file waits for it while it holds a slot
// (the base is often the rolled file's), rather than take a second one;
// a set without a base takes a free slot, or waits for the rolled file's
// before finishing its other files for want of one. So a pooled set
// (Delta) gains little; an inline one (Lance) encodes on meanwhile.
type Files[F File[R], R any] struct {
	// Finished is the files finished so far (durable, in no descriptor).
	Finished []R

	sink   string // names the sink in errors
	create Create[F]
	budget writers.MemoryCharger
	open   map[string]F // by Part.Key
	// charge holds what open files buffer on the budget (MemoryEncoder);
	// held is the bytes held.
	charge bool
	held   int64
	// base is the file writer slot a pooled encoder's set holds while it
	// has parts to encode (Staged gives it and takes it back), so that it
	// never waits for one; baseBusy while one of its files has it (a
	// rolling file gives it back from its own goroutine).
	base     func()
	baseBusy atomic.Bool
	// rolling is the rolled file finishing in the background, nil when
	// none. isRolling is set while it finishes (holding its slot and
	// what it buffered on the budget, which it gives back itself), for
	// Rolling, which Staged calls from other goroutines too; onRolled,
	// when set, is called once it is done, before awaitRolling can
	// return.
	rolling   chan rolled[R]
	isRolling atomic.Bool
	onRolled  func()
}

// rolled is what finishing a rolled file came to.
type rolled[R any] struct {
	r   R
	err error
}

// NewFiles returns an empty set of sink whose files create starts, in
// file writer slots of budget. What its files buffer is not charged to
// the budget (Staged's are).
func NewFiles[F File[R], R any](sink string, budget writers.MemoryCharger, create Create[F]) *Files[F, R] {
	return &Files[F, R]{sink: sink, create: create, budget: budget, open: make(map[string]F)}
}

// Write appends p's rows (borrowed) to the open file of p's partition
// (Part.Key), starting one when needed, and rolls it once Full.
func (s *Files[F, R]) Write(ctx context.Context, p Part) error {
	key := p.Key()
	f, ok := s.open[key]
	if ok && !f.Fits(p.Rec) {
		if err := s.roll(key); err != nil {
			return err
		}
		ok = false
	}
	if !ok {
		if len(s.open) >= MaxOpenFiles {
			if err := s.FinishAll(); err != nil {
				return err
			}
		}
		slot, err := s.slot(ctx)
		if err != nil {
			return err
		}
		if f, err = s.create(ctx, p, slot); err != nil {
			return err
		}
		s.open[key] = f
	}
	if err := f.Write(p.Rec); err != nil {
		return s.encodeError(f, err)
	}
	if f.Full() {
		return s.roll(key)
	}
	return nil
}

// roll starts finishing the open file of key in the background, once the
// file rolled before it is done (whose failure it returns).
func (s *Files[F, R]) roll(key string) error {
	if err := s.awaitRolling(); err != nil {
		return err
	}
	// What the file buffered stays held until it is done, by it.
	s.account()
	f := s.open[key]
	delete(s.open, key)
	var held int64
	if s.charge {
		held = f.Buffered()
		s.held -= held
	}
	done := make(chan rolled[R], 1)
	s.rolling = done
	s.isRolling.Store(true)
	go func() {
		var r rolled[R]
		// Guarded: a panic finishing the file fails the encoder, not
		// the process.
		r.err = writers.Guard(func() (err error) {
			r.r, err = f.Finish()
			return err
		})()
		if held != 0 {
			s.budget.Hold(writers.MemoryEncoder, -held)
		}
		s.isRolling.Store(false)
		if s.onRolled != nil {
			s.onRolled()
		}
		done <- r
	}()
	return nil
}

// awaitRolling waits for the file rolling in the background, if any, and
// records it finished.
func (s *Files[F, R]) awaitRolling() error {
	if s.rolling == nil {
		return nil
	}
	r := <-s.rolling
	s.rolling = nil
	if r.err != nil {
		return r.err
	}
	s.Finished = append(s.Finished, r.r)
	return nil
}

// Rolling reports whether a rolled file is still finishing in the
// background (holding its file writer slot).
func (s *Files[F, R]) Rolling() bool { return s.isRolling.Load() }

// Open returns the open file of p's partition (p.Rec is not used).
func (s *Files[F, R]) Open(p Part) (F, bool) {
	f, ok := s.open[p.Key()]
	return f, ok
}

// slot takes a file writer slot for a new file: the set's base when free,
// else another when one is free, else the set finishes its own files,
// which frees its base. A set without a base (inline) then waits for one,
// holding no slot: slots held while waiting could deadlock with the
// encoders waiting for them. That slot is the new file's alone, given
// back when it ends, so a set keeps no slot without an open file.
//
// A file rolling in the background holds a slot: a pooled set waits for
// it (often its base) rather than take a second slot, and any set waits
// for it before finishing its other open files for want of one.
func (s *Files[F, R]) slot(ctx context.Context) (func(), error) {
	if s.base != nil && !s.baseBusy.Load() {
		return s.takeBase(), nil
	}
	if s.base == nil || s.rolling == nil {
		if slot, ok := s.budget.TryOpenFile(); ok {
			return slot, nil
		}
	}
	if s.rolling != nil {
		if err := s.awaitRolling(); err != nil {
			return nil, err
		}
		return s.slot(ctx) // with the rolled file's slot free
	}
	if err := s.FinishAll(); err != nil {
		return nil, err
	}
	if s.base != nil {
		return s.takeBase(), nil
	}
	slot, err := s.budget.OpenFile(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: open a data file: %w", s.sink, err)
	}
	return slot, nil
}

// takeBase gives the base slot to a new file.
func (s *Files[F, R]) takeBase() func() {
	s.baseBusy.Store(true)
	return func() { s.baseBusy.Store(false) }
}

// finish finishes the open file of key and records it as finished.
func (s *Files[F, R]) finish(key string) error {
	f := s.open[key]
	delete(s.open, key)
	r, err := f.Finish()
	if err != nil {
		return err
	}
	s.Finished = append(s.Finished, r)
	return nil
}

// FinishAll finishes every open file, after the one rolling.
func (s *Files[F, R]) FinishAll() error {
	errs := []error{s.awaitRolling()}
	for key := range s.open {
		errs = append(errs, s.finish(key))
	}
	s.account()
	return errors.Join(errs...)
}

// Abort abandons every open file and gives back the base slot and what
// the set held on the budget: the set is done. A file rolling in the
// background is waited for: finished, it is among Finished (for the
// caller to delete).
func (s *Files[F, R]) Abort() {
	_ = s.awaitRolling() // failed, it published nothing
	for key, f := range s.open {
		f.Abort()
		delete(s.open, key)
	}
	if s.base != nil {
		s.base()
		s.base = nil
	}
	s.account()
}

// account brings what the set holds on the budget up to date with its
// open files.
func (s *Files[F, R]) account() {
	if !s.charge {
		return
	}
	var now int64
	for _, f := range s.open {
		now += f.Buffered()
	}
	s.budget.Hold(writers.MemoryEncoder, now-s.held)
	s.held = now
}

// relieve accounts for the open files and flushes what they buffer when
// the budget is under pressure.
func (s *Files[F, R]) relieve() error {
	s.account()
	if !s.budget.Pressure() {
		return nil
	}
	for _, f := range s.open {
		if err := f.Flush(); err != nil {
			return s.encodeError(f, err)
		}
	}
	s.account()
	return nil
}

// encodeError is f's encoder's err.
func (s *Files[F, R]) encodeError(f F, err error) error {
	return fmt.Errorf("%s: encode rows into %s: %w", s.sink, f.Name(), err)
}
