package lancetable

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/lance/internal/lancetest"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
)

// BenchmarkCommit: the commit of an append to a file:// dataset, and the
// commit that creates one (its folders included), with every sync they
// wait for: the latency an auto-commit stream adds after its data file.
func BenchmarkCommit(b *testing.B) {
	ctx := context.Background()
	mem := memory.NewGoAllocator()
	s := lancetest.AllTypesSchema()
	ls, err := lancefile.FromArrow(s)
	if err != nil {
		b.Fatal(err)
	}
	rec := lancetest.RandomRecord(mem, s, rand.New(rand.NewPCG(1, 2)), 0, 10, 20)
	defer rec.Release()
	root := b.TempDir()
	bucket := openDir(b, filepath.Join(root, "append.lance"))
	frag := putFragment(b, bucket, ls, rec)
	d, err := Commit(ctx, bucket, nil, &Transaction{Op: OpOverwrite, Schema: ls, Fragments: []Fragment{frag}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			if d, err = Commit(ctx, bucket, d, &Transaction{Op: OpAppend, Fragments: []Fragment{frag}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("create", func(b *testing.B) {
		dir, n := b.TempDir(), 0
		for b.Loop() {
			n++
			nb := openDir(b, filepath.Join(dir, fmt.Sprintf("new-%d.lance", n)))
			if _, err := Commit(ctx, nb, nil, &Transaction{Op: OpOverwrite, Schema: ls, Fragments: []Fragment{frag}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
