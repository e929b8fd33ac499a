package storage

import (
	"os"
	"path/filepath"
	"testing"
)

func TestQueueWriteback(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 3<<20)); err != nil {
		t.Fatal(err)
	}
	if err := queueWriteback(f, 1<<20, 2<<20); err != nil {
		t.Fatalf("queueWriteback: %v", err)
	}
	f.Close()
	if err := queueWriteback(f, 0, 1); err == nil {
		t.Fatal("queueWriteback on a closed file: no error")
	}
}
