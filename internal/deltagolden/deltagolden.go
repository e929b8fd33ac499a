// Package deltagolden opens the reference Delta tables of
// testdata/delta-golden (written by its generate.py: Spark + delta-spark,
// and delta-rs; its README documents each table) for the tests of the
// Delta packages, wherever they sit in the tree. It is for tests only.
package deltagolden

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/storage/storagetest"
)

// Dir returns the absolute path of testdata/delta-golden.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "delta-golden")
}

// Open opens the golden table name read-only (tests never write into it).
func Open(t *testing.T, name string) *storage.Bucket {
	t.Helper()
	dir := filepath.Join(Dir(), name)
	if _, err := os.Stat(filepath.Join(dir, "_delta_log")); err != nil {
		t.Fatalf("golden table %s is missing (make golden writes testdata/delta-golden): %v", name, err)
	}
	return storagetest.Open(t, "file://"+dir)
}
