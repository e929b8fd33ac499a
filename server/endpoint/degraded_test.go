package endpoint

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

// failing is a discard writer whose writes fail with writeErr when set.
type failing struct {
	*discard.Writer
	writeErr error
}

func (f *failing) Write(ctx context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	if f.writeErr != nil {
		return f.writeErr
	}
	return f.Writer.Write(ctx, key, rec)
}

// TestDegradedAfterSinkFailures: an open sink whose writes keep failing
// with the sink's fault makes the endpoint degraded after DegradeAfter
// failures in a row, with the last failure as the reason in Check and
// Problem; the caller's faults (InvalidArgument) and cancellations never
// count; a successful commit recovers it. (Before, Check passed while
// every write failed.)
func TestDegradedAfterSinkFailures(t *testing.T) {
	sink := &failing{Writer: discard.New(nil)}
	var logs bytes.Buffer
	w := New(sink, Options{Name: "ep", Sink: "failing", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { w.Close(context.Background()) })
	ctx := t.Context()
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	write := func(err error) {
		t.Helper()
		sink.writeErr = err
		rec := batch()
		defer rec.Release()
		if got := w.Write(ctx, writers.AutoKey("s"), rec); !errors.Is(got, err) {
			t.Fatalf("Write = %v, want %v", got, err)
		}
	}
	readOnly := writers.Errorf(writers.ErrUnavailable, "storage: put t/part-0.parquet: permission denied")
	for range 10 {
		write(writers.Errorf(writers.ErrInvalid, "column x: want int64"))
		write(context.Canceled)
	}
	if err := w.Check(ctx); err != nil {
		t.Fatalf("Check after the caller's failures: %v, want nil", err)
	}
	for i := range DefaultDegradeAfter {
		if err := w.Degraded(); err != nil {
			t.Fatalf("degraded after %d sink failures: %v", i, err)
		}
		write(readOnly)
	}
	for _, got := range []error{w.Degraded(), w.Problem(), w.Check(ctx)} {
		if !errors.Is(got, writers.ErrUnavailable) || !strings.Contains(got.Error(), `endpoint "ep" is degraded`) || !strings.Contains(got.Error(), "permission denied") {
			t.Fatalf("after %d sink failures: %v, want the endpoint degraded with the last failure", DefaultDegradeAfter, got)
		}
	}
	if !strings.Contains(logs.String(), "endpoint: degraded") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
	write(writers.Errorf(writers.ErrInvalid, "bad rows")) // the caller's: still degraded
	if w.Degraded() == nil {
		t.Fatal("a client's invalid rows cleared degraded")
	}

	write(nil)
	d, err := w.Precommit(ctx, writers.AutoKey("s"))
	if err == nil {
		_, err = w.Commit(ctx, writers.AutoKey("s"), []writers.Descriptor{d})
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Check(ctx); err != nil {
		t.Fatalf("Check after a successful commit: %v, want nil", err)
	}
	if !strings.Contains(logs.String(), "endpoint: recovered") {
		t.Errorf("no recovery logged:\n%s", logs.String())
	}
}

// failingCommit is a discard writer whose commits fail with err.
type failingCommit struct {
	*discard.Writer
	err error
}

func (f *failingCommit) Commit(context.Context, writers.TxnKey, []writers.Descriptor) (writers.CommitInfo, error) {
	return writers.CommitInfo{}, f.err
}

// TestCommitSpanRedacted: a failed commit's span, which leaves the
// process, carries the error with its URIs redacted. (Before, the raw
// error, credentials included.)
func TestCommitSpanRedacted(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	sink := &failingCommit{discard.New(nil), writers.Errorf(writers.ErrUnavailable, "commit to s3://KEY:SeCrEt@b/t?endpoint=http://KEY:SeCrEt@h: refused")}
	w := New(sink, Options{Name: "ep", Sink: "failing", TracerProvider: tp})
	t.Cleanup(func() { w.Close(context.Background()) })
	if err := w.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(t.Context(), writers.AutoKey("s"), nil); err == nil {
		t.Fatal("commit succeeded")
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	texts := []string{sp.Status.Description}
	for _, e := range sp.Events {
		for _, a := range e.Attributes {
			texts = append(texts, a.Value.String())
		}
	}
	all := strings.Join(texts, "\n")
	if strings.Contains(all, "SeCrEt") || !strings.Contains(sp.Status.Description, "s3://REDACTED@b/t?endpoint=REDACTED") {
		t.Errorf("span status and events:\n%s\nwant the URI redacted", all)
	}
}
