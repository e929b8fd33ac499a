package delta

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/writertest"
	"github.com/quiver-ingest/quiver/writers/writertest/tabletest"
)

// TestConformance runs the writer contract suite on mem:// and file://
// tables and on S3, GCS and Azure Blob emulators (internal/emulator),
// counting published rows by reading every active file back.
func TestConformance(t *testing.T) {
	roots := append([]tabletest.Root{{Name: "mem", URI: memURI}, {Name: "file", URI: fileURI}}, tabletest.CloudRoots("t")...)
	tabletest.RunTables(t, roots, func(uri func(*testing.T) string) writertest.Harness {
		return writertest.Harness{
			New: func(t *testing.T, mem memory.Allocator) writers.Writer {
				return openWriter(t, testConfig(uri(t)), mem)
			},
			Published: func(t *testing.T, w writers.Writer) int64 {
				// w may be closed already (the restart subtest): read
				// the table through a bucket of our own.
				return publishedRows(t, w.(*Writer).cfg)
			},
			Peer: func(t *testing.T, w writers.Writer) writers.Writer {
				return openWriter(t, w.(*Writer).cfg, w.(*Writer).mem)
			},
		}
	})
}
