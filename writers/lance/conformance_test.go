package lance

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

func TestConformance(t *testing.T) {
	dirs := map[writers.Writer]string{}
	writertest.Run(t, writertest.Harness{
		New: func(t *testing.T, mem memory.Allocator) writers.Writer {
			_, dir := dbDir(t, "t")
			w := newWriter(t, dir, mem)
			dirs[w] = dir
			return w
		},
		Published: func(t *testing.T, w writers.Writer) int64 { return published(t, w.(*Writer)) },
		Peer: func(t *testing.T, w writers.Writer) writers.Writer {
			p := newWriter(t, dirs[w], memory.DefaultAllocator)
			dirs[p] = dirs[w]
			return p
		},
	})
}
