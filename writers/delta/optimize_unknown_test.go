package delta

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage/storagetest"
)

// TestOptimizeOutcomeUnknown: when optimize's commit answer is lost,
// optimize reports ErrOutcomeUnknown without planning again and keeps the
// files it wrote (the commit may reference them): whether it landed or
// not, the table reads the same rows, and a later optimize finishes the
// job or finds nothing to do.
func TestOptimizeOutcomeUnknown(t *testing.T) {
	for _, land := range []bool{false, true} {
		name := map[bool]string{false: "lost", true: "landed"}[land]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			mem := checkedMem(t)
			cfg := upsertDVConfig(memURI(t))
			w := openWriter(t, cfg, mem)
			cols := []string{"id", "str"}
			seedIDs(t, w, mem, [2]int32{0, 20}, [2]int32{20, 40}, [2]int32{40, 60})
			rows := tableRows(t, cfg, cols)
			before := snapshot(t, cfg)
			files := func() int {
				n := 0
				for o, err := range w.bucket.List(ctx, "", "") {
					if err != nil {
						t.Fatal(err)
					}
					if strings.HasSuffix(o.Key, ".parquet") {
						n++
					}
				}
				return n
			}
			written := files()

			restore := storagetest.LoseAnswer(w.bucket, func(key string) bool {
				return strings.HasPrefix(key, deltalog.LogDir) && strings.HasSuffix(key, ".json")
			}, land)
			_, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20})
			if !errors.Is(err, writers.ErrOutcomeUnknown) {
				t.Fatalf("optimize with its commit answer lost: %v; want ErrOutcomeUnknown", err)
			}
			if got := files(); got != written+1 {
				t.Fatalf("%d data files after the unknown outcome, %d before: want the compacted file kept", got, written)
			}
			after := snapshot(t, cfg)
			if want := before.Version + map[bool]int64{false: 0, true: 1}[land]; after.Version != want {
				t.Fatalf("version %d after the unknown outcome, want %d", after.Version, want)
			}
			sameRows(t, "after the unknown outcome", tableRows(t, cfg, cols), rows)

			restore()
			res, err := w.Optimize(ctx, writers.OptimizeRequest{TargetFileBytes: 128 << 20})
			if err != nil || (res.FilesAdded == 1) == land {
				t.Fatalf("optimize after the unknown outcome = %+v, %v (commit landed: %v)", res, err, land)
			}
			if n := snapshot(t, cfg).NumFiles(); n != 1 {
				t.Fatalf("%d files after the second optimize, want 1", n)
			}
			sameRows(t, "after the second optimize", tableRows(t, cfg, cols), rows)
		})
	}
}
