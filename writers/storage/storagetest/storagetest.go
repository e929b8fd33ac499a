// Package storagetest is test support for the code above storage: it
// opens a bucket for the length of a test (Open) and injects the failures
// of a remote store into a storage.Bucket (LoseAnswer).
package storagetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/quiver-ingest/quiver/writers/storage"
)

// Open opens the bucket at uri for the rest of the test, failing the test
// when it cannot.
func Open(t testing.TB, uri string) *storage.Bucket {
	t.Helper()
	b, err := storage.Open(context.Background(), uri, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

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
