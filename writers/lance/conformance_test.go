package lance

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/writertest"
	"github.com/quiver-ingest/quiver/writers/writertest/tabletest"
)

// TestConformance runs the writer contract suite on file:// datasets and
// on S3, GCS and Azure Blob emulators (internal/emulator).
func TestConformance(t *testing.T) {
	local := tabletest.Root{Name: "file", URI: func(t *testing.T) string {
		_, dir := dbDir(t, "t")
		return "file://" + dir
	}}
	tabletest.RunTables(t, append([]tabletest.Root{local}, tabletest.CloudRoots("t.lance")...), func(uri func(*testing.T) string) writertest.Harness {
		uris := map[writers.Writer]string{}
		return writertest.Harness{
			New: func(t *testing.T, mem memory.Allocator) writers.Writer {
				u := uri(t)
				w := newWriterURI(t, u, mem)
				uris[w] = u
				return w
			},
			Published: func(t *testing.T, w writers.Writer) int64 {
				// w may be closed already (the restart subtest), and a
				// closed writer's bucket is closed on cloud stores: read
				// through a writer of our own.
				r := newWriterURI(t, uris[w], memory.DefaultAllocator)
				defer r.Close(context.Background())
				return published(t, r)
			},
			Peer: func(t *testing.T, w writers.Writer) writers.Writer {
				p := newWriterURI(t, uris[w], memory.DefaultAllocator)
				uris[p] = uris[w]
				return p
			},
		}
	})
}
