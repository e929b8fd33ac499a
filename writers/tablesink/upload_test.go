package tablesink

import (
	"context"
	"errors"
	"testing"

	"github.com/quiver-ingest/quiver/writers/storage"
)

// TestUpload: an upload is published by Close only when its end
// succeeds; a failed end and Abort leave no object; the slot is given
// back on every path, at once when the upload cannot start.
func TestUpload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := storage.Open(ctx, "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	slots := newBudget(1)
	start := func(key string) *Upload {
		t.Helper()
		slot, ok := slots.TryOpenFile()
		if !ok {
			t.Fatal("the slot was not given back")
		}
		up, err := StartUpload(ctx, b, "test", key, key, slot)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := up.Writer().Write([]byte("data")); err != nil {
			t.Fatal(err)
		}
		return up
	}
	exists := func(key string) bool {
		_, err := b.Stat(ctx, key)
		return err == nil
	}

	if err := start("ok").Close(func() error { return nil }); err != nil || !exists("ok") {
		t.Fatalf("close: %v; published %v, want published", err, exists("ok"))
	}
	boom := errors.New("footer failed")
	if err := start("failed").Close(func() error { return boom }); !errors.Is(err, boom) || exists("failed") {
		t.Fatalf("close with a failing end: %v, published %v; want %v, nothing published", err, exists("failed"), boom)
	}
	dropped := false
	start("aborted").Abort(func() { dropped = true })
	if !dropped || exists("aborted") {
		t.Fatalf("abort: encoder dropped %v, published %v; want dropped, nothing published", dropped, exists("aborted"))
	}
	slot, _ := slots.TryOpenFile()
	if _, err := StartUpload(ctx, b, "test", "../outside", "outside", slot); err == nil {
		t.Fatal("an upload to an invalid key started")
	}
	if slots.Slots() != 1 {
		t.Errorf("%d slots free, want the 1 given back by every path", slots.Slots())
	}
}
