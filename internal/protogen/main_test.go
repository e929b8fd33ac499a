package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate generates from the vendored protos into a
// temporary tree and compares with the committed code: a changed proto or
// generator without `make generate` fails here.
func TestGeneratedUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	tmp := t.TempDir()
	if err := os.CopyFS(filepath.Join(tmp, protoDir), os.DirFS(filepath.Join(root, protoDir))); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), tmp); err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Glob(filepath.Join(root, outDir, "*", "*.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := filepath.Glob(filepath.Join(tmp, outDir, "*", "*.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("generated %d files, %d committed: run make generate", len(got), len(want))
	}
	for _, w := range want {
		rel, _ := filepath.Rel(root, w)
		a, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(tmp, rel))
		if err != nil {
			t.Fatalf("%s is committed but no longer generated: run make generate", rel)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from what the vendored protos generate: run make generate", rel)
		}
	}
}
