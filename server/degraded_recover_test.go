package server

import (
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/server/endpoint"
)

// TestDegradedOnlyEndpointRecoversWithoutTraffic: a server with one
// endpoint (the usual deployment) whose storage refuses 3 writes in a
// row (a short outage) is degraded, and /readyz answers 503. A load
// balancer or Kubernetes then sends it no traffic, yet only a client's
// successful commit clears degraded: once the storage is back, /readyz
// must say ready again without a client write, or every replica hit by
// the same outage stays out of rotation for good.
func TestDegradedOnlyEndpointRecoversWithoutTraffic(t *testing.T) {
	dir := t.TempDir()
	s := startServerWith(t, dir, `endpoints:
  - name: lake
    sink: delta
    delta: {table_uri: "file://tables/lake"}
`, Options{})
	c, err := quiver.Dial(s.FlightAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Put(t.Context(), "lake", idReader(t, 3)); err != nil {
		t.Fatalf("first put: %v", err)
	}
	makeWritable := makeReadOnly(t, filepath.Join(dir, "tables", "lake"))
	for i := range endpoint.DefaultDegradeAfter {
		if _, err := c.Put(t.Context(), "lake", idReader(t, 3)); status.Code(err) != codes.Unavailable {
			t.Fatalf("put %d into a read-only table: %v, want Unavailable", i, err)
		}
	}
	base := "http://" + s.HTTPAddr() + "/readyz"
	if code, _ := httpGet(t, base); code != 503 {
		t.Fatalf("/readyz = %d while the only endpoint is degraded, want 503", code)
	}
	makeWritable() // the outage ends; no client reaches a server out of rotation
	// Out of rotation until a client commits would be for good: a
	// probe-gated balancer never lets one through.
	testpoll.Until(t, "/readyz to answer 200 once the storage is back, without a client commit", func() bool {
		code, _ := httpGet(t, base)
		return code == 200
	})
}
