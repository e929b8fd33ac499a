package server

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/metadata"
)

// TestTraces: with a tracer provider, a client's trace (W3C traceparent
// in the gRPC metadata) continues into the server: the DoPut stream, the
// precommit and commit actions and each sink commit are spans of it,
// carrying endpoint, writer, epoch, rows and the table version.
func TestTraces(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	s := startServerWith(t, t.TempDir(), `endpoints:
  - {name: events, sink: delta, delta: {table_uri: "file://tables/events"}}
`, Options{TracerProvider: tp})
	c := dialClient(t, s)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", "00-"+traceID+"-"+parentID+"-01")

	if _, err := c.Put(ctx, "events", idReader(t, 4)); err != nil {
		t.Fatal(err)
	}
	tx := c.Txn("job", 7)
	if _, err := tx.Put(ctx, "events", idReader(t, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Precommit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}

	spans := exp.GetSpans()
	find := func(name string, want ...attribute.KeyValue) {
		t.Helper()
	next:
		for _, sp := range spans {
			if sp.Name != name || sp.SpanContext.TraceID().String() != traceID {
				continue
			}
			have := attribute.NewSet(sp.Attributes...)
			for _, kv := range want {
				if v, ok := have.Value(kv.Key); !ok || v != kv.Value {
					continue next
				}
			}
			return
		}
		var names []string
		for _, sp := range spans {
			names = append(names, fmt.Sprint(sp.Name, " ", sp.SpanContext.TraceID(), " ", sp.Attributes))
		}
		t.Errorf("no span %s with %v in trace %s; spans:\n%v", name, want, traceID, names)
	}
	doPut := "arrow.flight.protocol.FlightService/DoPut"
	find(doPut, attribute.String("quiver.endpoint", "events"), attribute.Int64("quiver.rows", 4))
	find(doPut, attribute.String("quiver.writer", "job"), attribute.Int64("quiver.epoch", 7), attribute.Int64("quiver.rows", 3))
	find("quiver.sink.commit", attribute.String("quiver.endpoint", "events"), attribute.Int64("quiver.rows", 4), attribute.Int64("quiver.table_version", 0))
	find("quiver.sink.commit", attribute.String("quiver.writer", "job"), attribute.Int64("quiver.epoch", 7), attribute.Int64("quiver.rows", 3), attribute.Int64("quiver.table_version", 1))
	find("quiver.precommit", attribute.String("quiver.writer", "job"), attribute.Int64("quiver.epoch", 7), attribute.Int64("quiver.rows", 3))
	find("quiver.commit", attribute.String("quiver.writer", "job"), attribute.Int64("quiver.epoch", 7), attribute.Int64("quiver.table_version.events", 1))
	// The server spans are the client's children.
	for _, sp := range spans {
		if sp.Name == doPut && sp.Parent.SpanID().String() != parentID {
			t.Errorf("DoPut span's parent = %s, want the client's %s", sp.Parent.SpanID(), parentID)
		}
	}
}
