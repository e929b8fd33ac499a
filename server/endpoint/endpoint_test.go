package endpoint

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sink builds discard writers whose Open fails with the error set last.
type sink struct {
	mu      sync.Mutex
	openErr error
	built   atomic.Int32
	closed  atomic.Int32
	// attempts, when set, receives before every Open reads its error.
	attempts chan struct{}
	// script, when set, holds the errors of the next Opens, in order
	// (then openErr): an attempt's error must not depend on whether the
	// test changed openErr before or after that attempt read it.
	script []error
	// panics makes Open panic (a sink reading a hostile table).
	panics bool
}

type flaky struct {
	*discard.Writer
	s *sink
}

func (f flaky) Open(ctx context.Context) error {
	if f.s.attempts != nil {
		f.s.attempts <- struct{}{}
	}
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if f.s.panics {
		panic("index out of range reading the table")
	}
	if len(f.s.script) > 0 {
		err := f.s.script[0]
		f.s.script = f.s.script[1:]
		return err
	}
	return f.s.openErr
}

func (f flaky) Close(ctx context.Context) error {
	f.s.closed.Add(1)
	return f.Writer.Close(ctx)
}

func (s *sink) build() (writers.Writer, error) {
	s.built.Add(1)
	return flaky{discard.New(nil), s}, nil
}

func newWriter(t *testing.T, s *sink, logs *bytes.Buffer) *Writer {
	t.Helper()
	first, _ := s.build()
	w := New(first, Options{Name: "ep", Sink: "flaky", Rebuild: s.build,
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
		MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

func batch() arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Append(1)
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(schema, []arrow.Array{col}, 1)
}

// TestClasses: the reason keeps telling transient failures (Unavailable)
// from a sink that needs an operator (wrong state: FailedPrecondition).
func TestClasses(t *testing.T) {
	for _, tt := range []struct {
		cause, want error
	}{
		{writers.Errorf(writers.ErrUnavailable, "dial tcp: connection refused"), writers.ErrUnavailable},
		{context.DeadlineExceeded, writers.ErrUnavailable},
		{errors.New("unclassified"), writers.ErrUnavailable},
		{writers.Errorf(writers.ErrInvalid, "corrupt delta log"), writers.ErrWrongState},
		{writers.Errorf(writers.ErrPermissionDenied, "access denied"), writers.ErrWrongState},
	} {
		s := &sink{openErr: tt.cause}
		var logs bytes.Buffer
		w := newWriter(t, s, &logs)
		if err := w.Open(t.Context()); err != nil {
			t.Fatalf("Open: %v, want nil (the endpoint is unavailable, not the server)", err)
		}
		rec := batch()
		err := w.Write(t.Context(), writers.AutoKey("s"), rec)
		rec.Release()
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.cause.Error()) || !strings.Contains(err.Error(), `endpoint "ep" is unavailable`) {
			t.Errorf("cause %v: Write = %v, want class %v with the reason", tt.cause, err, tt.want)
		}
		if w.Check(t.Context()) == nil || w.Up() {
			t.Errorf("cause %v: Check passes or Up", tt.cause)
		}
		if s.closed.Load() != 1 {
			t.Errorf("the writer whose Open failed was closed %d times, want 1", s.closed.Load())
		}
	}
}

// TestOpenPanicIsUnavailable: a sink whose Open panics (a table another
// process wrote that the reader trips over) leaves its endpoint
// unavailable with the panic as the reason, on the first open and on
// retries, and the server up; once Open succeeds the endpoint serves.
func TestOpenPanicIsUnavailable(t *testing.T) {
	s := &sink{panics: true}
	var logs bytes.Buffer
	w := newWriter(t, s, &logs)
	if err := w.Open(t.Context()); err != nil {
		t.Fatalf("Open: %v, want nil (the endpoint is unavailable, not the server)", err)
	}
	if err := w.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "index out of range reading the table") {
		t.Fatalf("Check = %v, want the panic as the reason", err)
	}
	s.mu.Lock()
	s.attempts = make(chan struct{})
	s.mu.Unlock()
	w.Retry(nil, nil)
	<-s.attempts // a retry that panics too
	<-s.attempts
	s.mu.Lock()
	s.panics = false
	s.mu.Unlock()
	go func() {
		for range s.attempts {
		}
	}()
	testpoll.Until(t, "the endpoint opens once Open stops panicking", w.Up)
	w.Close(context.Background())
	close(s.attempts)
}

// TestRetryOpensAndSwaps: writes racing the background reopen either fail
// with the reason or reach the opened writer; after it opens onOpen runs
// once, after prepare got the rebuilt writer before it served, a rebuilt
// writer serves, and warnings were logged once per reason.
func TestRetryOpensAndSwaps(t *testing.T) {
	down := writers.Errorf(writers.ErrUnavailable, "broker down")
	refuses := writers.Errorf(writers.ErrUnavailable, "broker refuses")
	// The first Open, then three failed attempts with the same reason,
	// two with another, then success.
	s := &sink{openErr: down, attempts: make(chan struct{}), script: []error{down, down, down, down, refuses, refuses, nil}}
	var logs bytes.Buffer
	w := newWriter(t, s, &logs)
	go func() { <-s.attempts }() // the first Open
	if err := w.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	var prepared writers.Writer
	w.Retry(func(nw writers.Writer) {
		if w.Up() {
			t.Error("prepare ran after the reopened sink began serving")
		}
		prepared = nw
	}, func(context.Context) {
		if prepared == nil || prepared != w.Unwrap() {
			t.Errorf("prepare got %v, the serving sink is %v", prepared, w.Unwrap())
		}
		close(opened)
	})
	w.Retry(nil, nil) // a second loop is not started

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				rec := batch()
				err := w.Write(context.Background(), writers.AutoKey("s"), rec)
				rec.Release()
				if err != nil && !errors.Is(err, writers.ErrUnavailable) {
					t.Errorf("Write: %v", err)
				}
			}
		})
	}
	// An attempt proceeds when the test receives it.
	for range 6 {
		<-s.attempts
	}
	select {
	case <-opened:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not open")
	}
	close(stop)
	wg.Wait()
	if !w.Up() || w.Check(t.Context()) != nil {
		t.Fatal("not up after opening")
	}
	rec := batch()
	defer rec.Release()
	if err := w.Write(t.Context(), writers.AutoKey("s"), rec); err != nil {
		t.Fatalf("Write after opening: %v", err)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 2 {
		t.Errorf("%d warnings for 2 distinct reasons, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, "level=INFO") {
		t.Errorf("no recovery line:\n%s", out)
	}
}

// TestCloseStopsRetry: Close ends the retry loop (goleak checks) and
// closes nothing that was never opened twice.
func TestCloseStopsRetry(t *testing.T) {
	s := &sink{openErr: errors.New("down")}
	var logs bytes.Buffer
	w := newWriter(t, s, &logs)
	if err := w.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.Retry(nil, nil)
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s.closed.Load() != s.built.Load() {
		t.Fatalf("built %d writers, closed %d", s.built.Load(), s.closed.Load())
	}
	w.Retry(nil, nil) // after Close: nothing starts
}
