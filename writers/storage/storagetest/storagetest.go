// Package storagetest injects the failures of a remote store into a
// storage.Bucket, for the tests of the sinks above it.
package storagetest

import (
	"context"
	"errors"
	"sync"

	"github.com/quiver-ingest/quiver/writers/storage"
)

// LoseAnswer makes the first put-if-absent on b of a key match accepts
// fail with an error that does not say whether it landed (it does when
// land), and every later read of that key fail too: the outcome of the
// commit that key publishes is unknown to its writer. The returned func
// removes the fault.
func LoseAnswer(b *storage.Bucket, match func(key string) bool, land bool) (restore func()) {
	var (
		mu   sync.Mutex
		lost string
	)
	b.SetFault(func(ctx context.Context, op, key string, do func() error) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case op == "get" && key == lost:
			return errors.New("i/o timeout")
		case op != "put-if-absent" || lost != "" || !match(key):
			return do()
		}
		lost = key
		if land {
			if err := do(); err != nil {
				return err
			}
		}
		return errors.New("connection reset by peer")
	})
	return func() { b.SetFault(nil) }
}
