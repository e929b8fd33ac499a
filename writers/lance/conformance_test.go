package lance

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/emulator"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// TestConformance runs the writer contract suite on file:// datasets and
// on S3, GCS and Azure Blob emulators (internal/emulator).
func TestConformance(t *testing.T) {
	type dataset struct {
		name string
		uri  func(*testing.T) string
	}
	datasets := []dataset{{"file", func(t *testing.T) string {
		_, dir := dbDir(t, "t")
		return "file://" + dir
	}}}
	for _, e := range emulator.All() {
		datasets = append(datasets, dataset{e.Name, func(t *testing.T) string {
			s := e.Start(t)
			return s.URI(s.Bucket(t), "t.lance")
		}})
	}
	for _, ds := range datasets {
		t.Run(ds.name, func(t *testing.T) {
			uris := map[writers.Writer]string{}
			writertest.Run(t, writertest.Harness{
				TableSchema: true,
				New: func(t *testing.T, mem memory.Allocator) writers.Writer {
					uri := ds.uri(t)
					w := newWriterURI(t, uri, mem)
					uris[w] = uri
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
			})
		})
	}
}
