package storage

import (
	"context"
	"sync/atomic"
)

// Fault stands in for a Bucket's PutIfAbsent and Get, to inject the
// failures of a remote store (a lost answer) into tests of the code
// above: op is "put-if-absent" or "get", key the object's key and do the
// real operation, which Fault may skip or run. Its error is classified
// as the store's (see Error).
type Fault func(ctx context.Context, op, key string, do func() error) error

// faultHook holds a Bucket's Fault.
type faultHook struct{ f atomic.Pointer[Fault] }

// SetFault makes f stand in for b's PutIfAbsent and Get from now on (nil:
// none). Meant for tests; safe for concurrent use.
func (b *Bucket) SetFault(f Fault) {
	if f == nil {
		b.fault.f.Store(nil)
		return
	}
	b.fault.f.Store(&f)
}

// faulty runs do through b's Fault, if any.
func (b *Bucket) faulty(ctx context.Context, op, key string, do func() error) error {
	if f := b.fault.f.Load(); f != nil {
		return (*f)(ctx, op, key, do)
	}
	return do()
}

// Delayed returns a Fault that calls delay before each operation (nil
// for a nil delay): tests shake the interleaving of concurrent callers
// with it.
func Delayed(delay func()) Fault {
	if delay == nil {
		return nil
	}
	return func(ctx context.Context, op, key string, do func() error) error {
		delay()
		return do()
	}
}
