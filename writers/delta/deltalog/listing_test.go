package deltalog

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/writers/storage"
)

// skippingStore lists the log without one key, as a directory listing
// racing with the creation of commit files can.
type skippingStore struct {
	Store
	skip string
}

func (s skippingStore) List(ctx context.Context, prefix, startAfter string) iter.Seq2[storage.Object, error] {
	return func(yield func(storage.Object, error) bool) {
		for obj, err := range s.Store.List(ctx, prefix, startAfter) {
			if err == nil && obj.Key == s.skip {
				continue
			}
			if !yield(obj, err) {
				return
			}
		}
	}
}

// A version missing from a listing but present in storage is a listing
// race, not a gap: under 500 concurrent auto-commit streams a listing
// used to see version N+1 without N and call the log corrupt.
func TestLoadReadsVersionsMissingFromTheListing(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		read := create(t, store, nil)
		for i := range 3 {
			v, err := Commit(t.Context(), store, read, []Action{addAction(string(rune('a'+i)), "d")}, CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if read, err = Load(t.Context(), store); err != nil || read.Version != v {
				t.Fatalf("load after commit %d: %v", v, err)
			}
		}
		racy := skippingStore{Store: store, skip: CommitKey(2)}
		s, err := Load(t.Context(), racy)
		if err != nil {
			t.Fatalf("load with version 2 missing from the listing: %v", err)
		}
		if s.Version != 3 || len(s.Files()) != 3 {
			t.Fatalf("snapshot version %d with %d files, want 3 and 3", s.Version, len(s.Files()))
		}
		// A commit file that is really absent is still a gap.
		if err := deleteKey(t, store, CommitKey(2)); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(t.Context(), store); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "version 2 is missing") {
			t.Fatalf("load with version 2 deleted: %v, want ErrCorrupt naming version 2", err)
		}
	})
}

func deleteKey(t *testing.T, store Store, key string) error {
	t.Helper()
	b, ok := store.(*storage.Bucket)
	if !ok {
		t.Fatalf("store %T cannot delete", store)
	}
	return b.Delete(t.Context(), key)
}

// The same race when a snapshot catches up (Update) or a commit rebases
// over the commits that won: a listing showing version 3 without 2 made
// a committing stream fail with "the log after version 1 is not
// contiguous: corrupt delta log" under 64 concurrent streams.
func TestUpdateAndRebaseReadVersionsMissingFromTheListing(t *testing.T) {
	stores(t, func(t *testing.T, store Store) {
		stale := create(t, store, nil)
		if _, err := Commit(t.Context(), store, stale, []Action{addAction("a", "d")}, CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		stale, err := Load(t.Context(), store) // version 1
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"b", "c"} {
			read, err := Load(t.Context(), store)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Commit(t.Context(), store, read, []Action{addAction(f, "d")}, CommitOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		racy := skippingStore{Store: store, skip: CommitKey(2)}

		s, err := stale.Update(t.Context(), racy)
		if err != nil {
			t.Fatalf("update with version 2 missing from the listing: %v", err)
		}
		if s.Version != 3 || len(s.Files()) != 3 {
			t.Fatalf("updated to version %d with %d files, want 3 and 3", s.Version, len(s.Files()))
		}
		v, err := Commit(t.Context(), racy, stale, []Action{addAction("e", "d")}, CommitOptions{})
		if err != nil {
			t.Fatalf("commit rebasing over a listing without version 2: %v", err)
		}
		if v != 4 {
			t.Fatalf("committed version %d, want 4", v)
		}
		if s, err = Load(t.Context(), store); err != nil || len(s.Files()) != 4 {
			t.Fatalf("load after the rebased commit: %v (%d files, want 4)", err, len(s.Files()))
		}

		// A commit file that is really absent is still a gap.
		if err := deleteKey(t, store, CommitKey(3)); err != nil {
			t.Fatal(err)
		}
		if _, err := Commit(t.Context(), store, stale, []Action{addAction("f", "d")}, CommitOptions{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("commit rebasing over a log without version 3: %v, want ErrCorrupt", err)
		}
	})
}
