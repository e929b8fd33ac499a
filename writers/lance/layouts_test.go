package lance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// TestLayoutDatasetsNotWritable: an endpoint on a dataset pylance wrote
// with packed struct columns (2.2) or blob columns (blob v1 in 2.1, blob
// v2 in 2.2) does not open, with InvalidArgument naming the column (and
// "blob v2" for the latter): Quiver's files would lack their layout.
func TestLayoutDatasetsNotWritable(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	fixtures := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "lance-formats")
	for _, c := range []struct{ dataset, column, says string }{
		{"v2_2/packed", "p", "packed struct"},
		{"v2_1/blobs", "blob", "blob"},
		{"v2_2/blobs", "blob", "blob v2"},
	} {
		t.Run(c.dataset, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t.lance")
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, c.dataset+".lance"))); err != nil {
				t.Fatal(err)
			}
			cfg := NewConfig()
			cfg.DatasetURI = "file://" + dir
			w, err := New(cfg, writers.Env{Endpoint: "items", Allocator: memory.NewGoAllocator()})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(context.Background())
			err = w.Check(context.Background())
			if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), `"`+c.column+`"`) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Check = %v, want ErrInvalid naming column %q and %q", err, c.column, c.says)
			}
			if err := w.Open(context.Background()); !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("Open = %v, want ErrInvalid", err)
			}
		})
	}
}
