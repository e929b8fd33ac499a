// Package tabletest runs the writers.Writer conformance suite
// (writertest) for a table sink on local and emulated cloud storage. It
// is apart from writertest so that the other sinks' tests do not start
// the cloud SDKs' background goroutines (goleak).
package tabletest

import (
	"testing"

	"github.com/quiver-ingest/quiver/internal/emulator"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// Root is a kind of storage a table sink's suite runs on: Name names the
// subtest, URI returns the URI of a fresh, empty table there.
type Root struct {
	Name string
	URI  func(t *testing.T) string
}

// CloudRoots returns the S3, GCS and Azure Blob emulators
// (internal/emulator) as roots of tables at path in a fresh bucket.
func CloudRoots(path string) []Root {
	var roots []Root
	for _, e := range emulator.All() {
		roots = append(roots, Root{e.Name, func(t *testing.T) string {
			s := e.Start(t)
			return s.URI(s.Bucket(t), path)
		}})
	}
	return roots
}

// RunTables runs writertest's suite for a table sink
// (Harness.TableSchema) on each of roots, with the harness h returns for
// the root's URIs.
func RunTables(t *testing.T, roots []Root, h func(uri func(t *testing.T) string) writertest.Harness) {
	for _, r := range roots {
		t.Run(r.Name, func(t *testing.T) {
			harness := h(r.URI)
			harness.TableSchema = true
			writertest.Run(t, harness)
		})
	}
}
