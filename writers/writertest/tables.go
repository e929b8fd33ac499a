package writertest

import (
	"testing"

	"github.com/quiver-ingest/quiver/internal/emulator"
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

// RunTables runs the suite for a table sink (Harness.TableSchema) on each
// of roots, with the harness h returns for the root's URIs.
func RunTables(t *testing.T, roots []Root, h func(uri func(t *testing.T) string) Harness) {
	for _, r := range roots {
		t.Run(r.Name, func(t *testing.T) {
			harness := h(r.URI)
			harness.TableSchema = true
			Run(t, harness)
		})
	}
}
