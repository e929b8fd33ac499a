package server

import (
	"log/slog"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/server/config"
)

// Every sink gives its metrics back on Close, so that an endpoint can be
// closed and built again in one process on the same registry.
func TestEndpointsRebuiltOnOneRegistry(t *testing.T) {
	const yaml = `
endpoints:
  - {name: devnull, sink: discard}
  - name: events
    sink: delta
    delta: {table_uri: file://delta/events, mode: append}
  - name: clicks
    sink: kafka
    kafka: {brokers: ["127.0.0.1:1"], topic: clicks, format: json}
  - name: items
    sink: lance
    lance: {dataset_uri: file://lance/items.lance, mode: append}
`
	cfg, err := config.Parse([]byte(yaml), t.TempDir(), Sinks())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	for round := range 2 {
		eps, err := buildEndpoints(cfg, Sinks(), slog.New(slog.DiscardHandler), reg, memory.DefaultAllocator, nil)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, e := range eps {
			if err := e.Writer.Close(t.Context()); err != nil {
				t.Fatalf("round %d: close %s: %v", round, e.Name, err)
			}
		}
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
		t.Fatalf("after Close the registry still holds %d metric families (err %v)", len(mfs), err)
	}
}
