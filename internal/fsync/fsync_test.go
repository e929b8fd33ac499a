package fsync

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDir(t *testing.T) {
	dir := t.TempDir()
	if err := Dir(dir); err != nil {
		t.Fatalf("Dir(%s): %v", dir, err)
	}
	if err := Dir(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("Dir of a missing directory: %v, want not-exist", err)
	}
}
