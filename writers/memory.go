package writers

import "context"

// MemoryKind names what a sink holds in memory, for the budget's
// accounting and its quiver_memory_bytes{kind} gauge.
type MemoryKind uint8

const (
	// MemoryEncoder is what encoders buffer: open Parquet row groups,
	// pending Lance pages.
	MemoryEncoder MemoryKind = iota + 1
	// MemoryStaging is what a sink holds on its way out that is neither:
	// staged records in memory, records in flight to a broker.
	MemoryStaging
	// MemoryQueued is batches a sink took from Write and works through on
	// its own (Delta's encoder queues): they drain without their stream
	// going on, so streams wait for them rather than go over the limit.
	MemoryQueued
)

// MemoryCharger is the server's memory budget as a sink sees it
// (Env.Memory). Sinks report what they hold beyond a Write call and
// react to pressure; the streams feeding them are the ones that wait.
type MemoryCharger interface {
	// Hold changes the bytes of kind the sink holds by delta (negative
	// gives back). It never blocks, because a sink's memory drains only if
	// the sink keeps going: it may take the budget over its limit, and
	// streams then wait until the sink gives memory back.
	Hold(kind MemoryKind, delta int64)
	// Pressure reports that the budget is full and streams wait for it:
	// encoders should flush what they buffer (row groups, pages) early.
	Pressure() bool
	// OpenFile waits for one of the process's open file-writer slots
	// (limits.max_open_files) and returns the function that gives it back.
	// It fails with ErrExhausted after limits.admission_timeout, or when
	// ctx ends. A sink holding slots must not wait for another one: it
	// calls TryOpenFile first and finishes its own files when that fails.
	OpenFile(ctx context.Context) (release func(), err error)
	// TryOpenFile takes a slot if one is free.
	TryOpenFile() (release func(), ok bool)
}

// MemoryOf returns env's memory budget, or one without limits when the
// server gave none (tests, tools).
func MemoryOf(env Env) MemoryCharger {
	if env.Memory == nil {
		return unlimited{}
	}
	return env.Memory
}

type unlimited struct{}

func (unlimited) Hold(MemoryKind, int64)                   {}
func (unlimited) Pressure() bool                           { return false }
func (unlimited) OpenFile(context.Context) (func(), error) { return func() {}, nil }
func (unlimited) TryOpenFile() (func(), bool)              { return func() {}, true }
