package txn

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/quiver-ingest/quiver/internal/redact"
)

// tracerName names the coordinator's spans' instrumentation scope.
const tracerName = "github.com/quiver-ingest/quiver/txn"

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// startSpan starts the span of one transaction call, a child of the
// caller's (the DoAction's) span.
func (c *Coordinator) startSpan(ctx context.Context, name, writer string, epoch int64) (context.Context, trace.Span) {
	return c.tracer.Start(ctx, name, trace.WithAttributes(
		attribute.String("quiver.writer", writer),
		attribute.Int64("quiver.epoch", epoch),
	))
}

// endSpan records a call's outcome: the participants with their rows and,
// once committed, table versions; or the error.
func endSpan(span trace.Span, st Status, err error) {
	defer span.End()
	if err != nil {
		shown := redact.Error(err) // spans leave the process
		span.RecordError(shown)
		span.SetStatus(codes.Error, shown.Error())
		return
	}
	var rows int64
	eps := make([]string, len(st.Participants))
	for i, p := range st.Participants {
		rows += p.Rows
		eps[i] = p.Endpoint
		if p.Version >= 0 {
			span.SetAttributes(attribute.Int64("quiver.table_version."+p.Endpoint, p.Version))
		}
	}
	span.SetAttributes(
		attribute.String("quiver.state", string(st.State)),
		attribute.StringSlice("quiver.endpoints", eps),
		attribute.Int64("quiver.rows", rows),
		attribute.Bool("quiver.replayed", st.Replayed),
	)
}
