package quiver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/internal/testpoll"
)

// fastRetry keeps reconnections quick in tests.
var fastRetry = WithReconnectBackoff(time.Millisecond, 10*time.Millisecond)

// testBatches returns n batches of rows rows of testSchema from a checked
// allocator that must be empty at cleanup: the test's references are
// released there, so anything a Stream retained and never released shows.
func testBatches(t *testing.T, n, rows int) []arrow.RecordBatch {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	b := array.NewRecordBuilder(mem, testSchema)
	defer b.Release()
	recs := make([]arrow.RecordBatch, n)
	for i := range recs {
		for j := range rows {
			b.Field(0).(*array.Int64Builder).Append(int64(i*rows + j))
		}
		recs[i] = b.NewRecordBatch()
	}
	t.Cleanup(func() {
		for _, r := range recs {
			r.Release()
		}
		mem.AssertSize(t, 0)
	})
	return recs
}

// writeAll writes recs and checks their seqs follow from first.
func writeAll(t *testing.T, s *Stream, first int64, recs []arrow.RecordBatch) {
	t.Helper()
	for i, rec := range recs {
		seq, err := s.Write(context.Background(), rec)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if want := first + int64(i); seq != want {
			t.Fatalf("write %d: seq %d, want %d", i, seq, want)
		}
	}
}

func seqs(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// TestStreamResumesAfterUnavailable: the fake commits every 3 batches and
// fails with Unavailable once it has accepted seq 4. The Stream reconnects,
// drops what the opening answer says is durable, and resends the rest once,
// in order; every batch is committed exactly once.
func TestStreamResumesAfterUnavailable(t *testing.T) {
	tests := []struct {
		name             string
		commitBeforeFail bool // the fake commits 3 and 4 but fails before answering
		refuseOpens      int
		resentFrom       int64
	}{
		{"pending batches resent", false, 0, 3},
		{"batches durable but unanswered dropped", true, 0, 5},
		{"openings refused before the first", false, 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, addr := startFake(t, "")
			c := dialT(t, addr)
			f.mu.Lock()
			f.streams.commitEvery, f.streams.failAfter, f.streams.commitBeforeFail = 3, 4, tt.commitBeforeFail
			f.streams.refuseOpens = tt.refuseOpens
			f.mu.Unlock()
			recs := testBatches(t, 10, 5)
			var mu sync.Mutex
			var hooked []int64
			var reconnects []error
			s, err := c.Stream(context.Background(), "sink", "collector", fastRetry,
				WithOnDurable(func(seq int64) { mu.Lock(); hooked = append(hooked, seq); mu.Unlock() }),
				WithOnReconnect(func(err error, _ time.Duration) { reconnects = append(reconnects, err) }))
			if err != nil {
				t.Fatal(err)
			}
			writeAll(t, s, 0, recs)
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			committed, durable := f.writerState("collector")
			if !slices.Equal(committed, seqs(0, 9)) || durable != 9 || s.Durable() != 9 {
				t.Errorf("committed %v (durable %d, client says %d), want seqs 0..9 once, in order", committed, durable, s.Durable())
			}
			conns := f.streamConns()
			if len(conns) != 2 || !slices.Equal(conns[1], seqs(tt.resentFrom, 9)) {
				t.Errorf("connections received %v, want two, the second from seq %d on", conns, tt.resentFrom)
			}
			if len(reconnects) != tt.refuseOpens+1 || status.Code(reconnects[0]) != codes.Unavailable {
				t.Errorf("OnReconnect saw %v, want %d Unavailable errors", reconnects, tt.refuseOpens+1)
			}
			if !slices.IsSorted(hooked) || len(hooked) == 0 || hooked[len(hooked)-1] != 9 {
				t.Errorf("OnDurable saw %v, want increasing seqs up to 9", hooked)
			}
			if v, ok := s.Version(); !ok || v < 2 {
				t.Errorf("Version() = %d, %v; want the last commit's", v, ok)
			}

			// The writer's next stream starts where it stands.
			next, err := c.Stream(context.Background(), "sink", "collector", WithStreamSchema(testSchema))
			if err != nil {
				t.Fatal(err)
			}
			if got := next.Durable(); got != 9 {
				t.Errorf("a new stream's Durable() = %d, want 9", got)
			}
			writeAll(t, next, 10, recs[:1])
			if err := next.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if committed, _ := f.writerState("collector"); !slices.Equal(committed, seqs(0, 10)) {
				t.Errorf("committed %v, want 0..10", committed)
			}
		})
	}
}

// TestStreamBackpressure: with commits held, Write blocks once the bytes
// not yet durable would pass the bound, and goes on when a commit makes
// some durable. A Write that gave up took no seq.
func TestStreamBackpressure(t *testing.T) {
	f, addr := startFake(t, "")
	c := dialT(t, addr)
	recs := testBatches(t, 4, 100)
	size := util.TotalRecordSize(recs[0])
	s, err := c.Stream(context.Background(), "sink", "w", WithMaxInflightBytes(2*size+size/2))
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, s, 0, recs[:2])
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Write(ctx, recs[2]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third write over the bound: %v, want it to block until its deadline", err)
	}
	type result struct {
		seq int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		seq, err := s.Write(context.Background(), recs[2])
		done <- result{seq, err}
	}()
	f.streams.commit <- struct{}{}
	if r := <-done; r.err != nil || r.seq != 2 {
		t.Fatalf("write after a commit: seq %d, %v; want seq 2", r.seq, r.err)
	}
	if got := s.Durable(); got != 1 {
		t.Errorf("Durable() = %d after the commit, want 1", got)
	}
	if err := s.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("flush with commits held: %v, want its deadline", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.Durable(); got != 2 {
		t.Errorf("Durable() = %d after Close, want 2", got)
	}

	// A batch over the bound goes alone.
	one, err := c.Stream(context.Background(), "sink", "w2", WithMaxInflightBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, one, 0, recs[3:])
	if err := one.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestStreamFinalErrors: errors other than Unavailable end the stream
// without a reconnection, and Write, Flush and Close return them.
func TestStreamFinalErrors(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		fence    bool // a second stream of the writer opens
		code     codes.Code
	}{
		{"fenced", "sink", true, codes.Aborted},
		{"batch refused", "reject", false, codes.InvalidArgument},
		{"writer of transactions", "epochs", false, codes.FailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, addr := startFake(t, "")
			c := dialT(t, addr)
			recs := testBatches(t, 2, 5)
			s, err := c.Stream(context.Background(), tt.endpoint, "w", fastRetry)
			if err != nil {
				t.Fatal(err)
			}
			_, werr := s.Write(context.Background(), recs[0])
			if tt.fence {
				if werr != nil {
					t.Fatal(werr)
				}
				other, err := c.Stream(context.Background(), tt.endpoint, "w", WithStreamSchema(testSchema))
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := other.Close(context.Background()); err != nil {
						t.Error(err)
					}
				}()
			}
			ferr := s.Flush(context.Background())
			_, werr2 := s.Write(context.Background(), recs[1])
			cerr := s.Close(context.Background())
			for name, err := range map[string]error{"flush": ferr, "write": werr2, "close": cerr} {
				if status.Code(err) != tt.code || !strings.Contains(err.Error(), `quiver: stream "w" to "`+tt.endpoint+`"`) {
					t.Errorf("%s: %v, want %v naming the stream", name, err, tt.code)
				}
			}
			if n := len(f.streamConns()); n > 2 {
				t.Errorf("%d connections: the stream reconnected after a final error", n)
			}
		})
	}
}

// TestStreamCloseWaitsForClosed: Close returns only once the closed answer
// came; if ctx ends first it aborts and releases everything.
func TestStreamCloseWaitsForClosed(t *testing.T) {
	f, addr := startFake(t, "")
	c := dialT(t, addr)
	recs := testBatches(t, 3, 5)
	gate := make(chan struct{})
	f.mu.Lock()
	f.streams.closeGate = gate
	f.mu.Unlock()

	s, err := c.Stream(context.Background(), "sink", "w")
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, s, 0, recs)
	done := make(chan error, 1)
	go func() { done <- s.Close(context.Background()) }()
	testpoll.Until(t, "the fake to hold the closed answer", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.streams.atGate
	})
	select {
	case err := <-done:
		t.Fatalf("Close returned %v before the closed answer", err)
	default:
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := s.Durable(); got != 2 {
		t.Errorf("Durable() = %d, want 2", got)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Write(context.Background(), recs[0]); err == nil || !strings.Contains(err.Error(), "write after Close") {
		t.Errorf("write after Close: %v", err)
	}

	// A closed answer that never comes: Close gives up at its deadline.
	f.mu.Lock()
	f.streams.closeGate = make(chan struct{})
	f.mu.Unlock()
	held, err := c.Stream(context.Background(), "sink", "w")
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, held, 3, recs)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := held.Close(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "close") {
		t.Errorf("close past its deadline: %v", err)
	}
	if err := held.Flush(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("flush after an aborted close: %v, want the close's error", err)
	}
}

// TestStreamServerEndsWithoutClosed: a server that ends the call without
// the closed answer breaks the contract; Close says so.
func TestStreamServerEndsWithoutClosed(t *testing.T) {
	f, addr := startFake(t, "")
	c := dialT(t, addr)
	f.mu.Lock()
	f.streams.noClosedAnswer = true
	f.mu.Unlock()
	s, err := c.Stream(context.Background(), "sink", "w")
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, s, 0, testBatches(t, 1, 5))
	if err := s.Close(context.Background()); err == nil || !strings.Contains(err.Error(), "without the closed answer") {
		t.Errorf("Close: %v, want the missing closed answer", err)
	}
}

func TestStreamWriteChecksSchema(t *testing.T) {
	_, addr := startFake(t, "")
	c := dialT(t, addr)
	s, err := c.Stream(context.Background(), "sink", "w")
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, s, 0, testBatches(t, 1, 5))
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, other)
	defer b.Release()
	rec := b.NewRecordBatch()
	defer rec.Release()
	if _, err := s.Write(context.Background(), rec); err == nil || !strings.Contains(err.Error(), "differs from the stream's") {
		t.Errorf("write of another schema: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("close after a refused write: %v (it must not end the stream)", err)
	}
}

func TestStreamOptionErrors(t *testing.T) {
	c := dialT(t, "127.0.0.1:1")
	tests := []struct {
		name     string
		endpoint string
		opts     []StreamOption
		want     string
	}{
		{"no endpoint", "", nil, "must not be empty"},
		{"zero bound", "e", []StreamOption{WithMaxInflightBytes(0)}, "must be positive"},
		{"shrinking backoff", "e", []StreamOption{WithReconnectBackoff(time.Second, time.Millisecond)}, "backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Stream(context.Background(), tt.endpoint, "w", tt.opts...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Stream: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// Nothing written, nothing opened: Close has nothing to do.
	s, err := c.Stream(context.Background(), "e", "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("close of a stream never opened: %v", err)
	}
}

// TestStreamDictionariesAcrossReconnect: a dictionary column's
// dictionaries go with its batches, and again on a new connection, whose
// server has never seen them.
func TestStreamDictionariesAcrossReconnect(t *testing.T) {
	f, addr := startFake(t, "")
	c := dialT(t, addr)
	f.mu.Lock()
	f.streams.commitEvery, f.streams.failAfter = 2, 2
	f.mu.Unlock()
	schema := arrow.NewSchema([]arrow.Field{{Name: "level", Type: &arrow.DictionaryType{
		IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}}}, nil)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	s, err := c.Stream(context.Background(), "sink", "w", fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		db := b.Field(0).(*array.BinaryDictionaryBuilder)
		for _, v := range []string{"info", "warn", "info"} {
			if err := db.AppendString(fmt.Sprint(v, i)); err != nil {
				t.Fatal(err)
			}
		}
		rec := b.NewRecordBatch()
		_, err := s.Write(context.Background(), rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if committed, _ := f.writerState("w"); !slices.Equal(committed, seqs(0, 3)) {
		t.Errorf("committed %v, want 0..3", committed)
	}
	if conns := f.streamConns(); len(conns) != 2 || !slices.Equal(conns[1], seqs(2, 3)) {
		t.Errorf("connections received %v, want a reconnection resending 2 and 3", conns)
	}
}

// TestStreamReconnectsAfterACut: a connection cut under the stream (a
// transport error, Unavailable) makes it reconnect and resend what was
// not durable.
func TestStreamReconnectsAfterACut(t *testing.T) {
	f, addr := startFake(t, "")
	p := StartCutProxy(t, addr)
	c := dialT(t, p.Addr)
	recs := testBatches(t, 6, 5)
	s, err := c.Stream(context.Background(), "sink", "w", fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, s, 0, recs[:3])
	testpoll.Until(t, "the fake to receive 3 batches", func() bool {
		conns := f.streamConns()
		return len(conns) == 1 && len(conns[0]) == 3
	})
	p.Cut()
	writeAll(t, s, 3, recs[3:])
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if committed, _ := f.writerState("w"); !slices.Equal(committed, seqs(0, 5)) {
		t.Errorf("committed %v, want 0..5", committed)
	}
	if conns := f.streamConns(); len(conns) != 2 || !slices.Equal(conns[1], seqs(0, 5)) {
		t.Errorf("connections received %v, want a second one with everything (nothing was durable)", conns)
	}
}
