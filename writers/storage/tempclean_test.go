package storage

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A killed process leaves its temporary files behind (100 after one
// kill -9 under load): old ones are removed, young ones (a live writer of
// another process) and every other file stay.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(t.Context(), "file://"+dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	old := time.Now().Add(-2 * StaleTempAge)
	files := map[string]bool{ // path → removed
		"part-0.parquet": false,
		".part-1.parquet.quiver-tmp-0123456789abcdef":         true,
		"day=1/.part-2.parquet.quiver-tmp-aa":                 true,
		"_delta_log/.00000000000000000003.json.quiver-tmp-bb": true,
		"_delta_log/00000000000000000000.json":                false,
		".hidden":                                             false,
	}
	for name := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
	}
	young := filepath.Join(dir, ".part-9.parquet.quiver-tmp-cc")
	if err := os.WriteFile(young, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := b.RemoveStaleTemps(t.Context(), StaleTempAge)
	if err != nil || n != 3 {
		t.Fatalf("removed %d (%v), want 3", n, err)
	}
	for name, removed := range files {
		_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
		if removed != os.IsNotExist(err) {
			t.Errorf("%s: removed %v, want %v", name, os.IsNotExist(err), removed)
		}
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("a young temporary file was removed: %v", err)
	}
}
