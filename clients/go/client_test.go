package quiver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/internal/testpoll"
)

var testSchema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

// testReader returns a reader over batches of the given sizes, built with
// a checked allocator that must be empty when the test ends.
func testReader(t *testing.T, sizes ...int) array.RecordReader {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	b := array.NewRecordBuilder(mem, testSchema)
	defer b.Release()
	var recs []arrow.RecordBatch
	var id int64
	for _, n := range sizes {
		for range n {
			b.Field(0).(*array.Int64Builder).Append(id)
			id++
		}
		recs = append(recs, b.NewRecordBatch())
	}
	r, err := array.NewRecordReader(testSchema, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		rec.Release()
	}
	t.Cleanup(func() {
		r.Release()
		mem.AssertSize(t, 0)
	})
	return r
}

func dialT(t *testing.T, addr string, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestPut(t *testing.T) {
	_, addr := startFake(t, "")
	c := dialT(t, addr)
	tests := []struct {
		name  string
		sizes []int
	}{
		{"three batches", []int{10, 20, 30}},
		{"no batches", nil},
		{"empty batch", []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var sent []int64
			var acks []BatchAck
			sendDone := 0
			trace := PutTrace{
				BatchSend: func(i int, rows int64) { mu.Lock(); sent = append(sent, rows); mu.Unlock() },
				SendDone:  func() { mu.Lock(); sendDone++; mu.Unlock() },
				BatchAck:  func(a BatchAck) { mu.Lock(); acks = append(acks, a); mu.Unlock() },
			}
			ack, err := c.Put(context.Background(), "sink", testReader(t, tt.sizes...), WithTrace(trace))
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			var wantAcks []BatchAck
			for i, n := range tt.sizes {
				total += int64(n)
				wantAcks = append(wantAcks, BatchAck{Index: i, Batch: int64(i), Rows: int64(n), TotalRows: total})
			}
			if !ack.Committed || ack.Rows != total || ack.Version == nil {
				t.Errorf("ack = %+v, want committed with %d rows and a version", ack, total)
			}
			if !slices.Equal(acks, wantAcks) {
				t.Errorf("batch acks = %+v, want %+v", acks, wantAcks)
			}
			if len(sent) != len(tt.sizes) || sendDone != 1 {
				t.Errorf("BatchSend called %d times, SendDone %d times; want %d and 1", len(sent), sendDone, len(tt.sizes))
			}
		})
	}
}

func TestPutServerErrorKeepsStatus(t *testing.T) {
	_, addr := startFake(t, "")
	c := dialT(t, addr)
	_, err := c.Put(context.Background(), "reject", testReader(t, 5, 5, 5, 5))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "refuses a second batch") {
		t.Fatalf("err = %v (code %v), want InvalidArgument from the server", err, status.Code(err))
	}
}

// failingReader yields one batch, then fails.
type failingReader struct {
	array.RecordReader
	n int
}

var errBrokenInput = errors.New("broken input")

func (r *failingReader) Next() bool { r.n++; return r.n == 1 && r.RecordReader.Next() }
func (r *failingReader) Err() error {
	if r.n > 1 {
		return errBrokenInput
	}
	return nil
}

func TestPutReaderErrorCancelsStream(t *testing.T) {
	f, addr := startFake(t, "")
	c := dialT(t, addr)
	_, err := c.Put(context.Background(), "sink", &failingReader{RecordReader: testReader(t, 3, 3)})
	if !errors.Is(err, errBrokenInput) {
		t.Fatalf("err = %v, want the reader's error", err)
	}
	// The server must see the stream fail, not end cleanly (which would
	// commit a partial stream).
	testpoll.Until(t, "the server's DoPut to fail", func() bool { return status.Code(f.lastPutErr()) == codes.Canceled })
}

func TestToken(t *testing.T) {
	_, addr := startFake(t, "s3cret")
	tests := []struct {
		name string
		opts []Option
		want codes.Code
	}{
		{"missing", nil, codes.Unauthenticated},
		{"wrong", []Option{WithToken("nope")}, codes.Unauthenticated},
		{"right", []Option{WithToken("s3cret")}, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialT(t, addr, tt.opts...)
			if _, err := c.Put(context.Background(), "sink", testReader(t, 1)); status.Code(err) != tt.want {
				t.Errorf("Put: %v, want code %v", err, tt.want)
			}
			if _, err := c.Health(context.Background()); status.Code(err) != tt.want {
				t.Errorf("Health: %v, want code %v", err, tt.want)
			}
		})
	}
}

func TestTxn(t *testing.T) {
	f, addr := startFake(t, "")
	c := dialT(t, addr)
	ctx := context.Background()

	tx, err := c.Begin(ctx, "job", 3, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.lastBody); got != `{"writer":"job","epoch":3,"ttl_s":2}` {
		t.Errorf("begin body = %s, want ttl rounded up to 2 s", got)
	}
	if tx.Attempt() != "0000000000000001" {
		t.Errorf("attempt = %q, want the one begin answered", tx.Attempt())
	}
	ack, err := tx.Put(ctx, "sink", testReader(t, 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.lastCmd); got != `{"endpoint":"sink","writer":"job","epoch":3,"attempt":"0000000000000001"}` {
		t.Errorf("put descriptor = %s, want the attempt named", got)
	}
	if want := (StagedAck{Staged: true, Rows: 8, Writer: "job", Epoch: 3}); ack != want {
		t.Errorf("staged ack = %+v, want %+v", ack, want)
	}
	pre, err := tx.Precommit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pre.State != StatePrecommitted || len(pre.Participants) != 1 || pre.Participants[0].Rows != 8 ||
		string(pre.Participants[0].Descriptor) != "job@3" {
		t.Errorf("precommit = %+v", pre)
	}
	res, err := tx.Commit(ctx, map[string][][]byte{"other": {[]byte("d1")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.lastBody); got != `{"writer":"job","epoch":3,"attempt":"0000000000000001","descriptors":{"other":["ZDE="]}}` {
		t.Errorf("commit body = %s, want descriptors base64-encoded", got)
	}
	if res.State != StateCommitted || res.Replayed || *res.Endpoints["sink"].Version != 7 || res.Endpoints["other"].Version != nil {
		t.Errorf("commit = %+v", res)
	}

	epoch, ok, err := c.CommittedEpoch(ctx, "sink", "job")
	if err != nil || !ok || epoch != 3 {
		t.Errorf("CommittedEpoch = %d, %v, %v; want 3, true", epoch, ok, err)
	}
	if _, ok, err := c.CommittedEpoch(ctx, "sink", "nobody"); err != nil || ok {
		t.Errorf("CommittedEpoch of an unknown writer: ok=%v err=%v, want not ok", ok, err)
	}

	// Replaying the committed epoch: the put says replayed, commit too.
	// The handle's first put begins a new attempt and names it.
	replay := c.Txn("job", 3)
	ack, err = replay.Put(ctx, "sink", testReader(t, 4))
	if err != nil || !ack.Replayed || ack.Staged {
		t.Errorf("replayed put = %+v, %v", ack, err)
	}
	if got := string(f.lastCmd); replay.Attempt() != "0000000000000002" || got != `{"endpoint":"sink","writer":"job","epoch":3,"attempt":"0000000000000002"}` {
		t.Errorf("replay's attempt %q, put descriptor %s: want a second attempt, named", replay.Attempt(), got)
	}
	if res, err := replay.Commit(ctx, nil); err != nil || !res.Replayed {
		t.Errorf("replayed commit = %+v, %v", res, err)
	}
	if res, err := c.Txn("job", 4).Rollback(ctx); err != nil || res.State != StateAborted {
		t.Errorf("rollback = %+v, %v", res, err)
	}
	if got := string(f.lastBody); got != `{"writer":"job","epoch":4}` {
		t.Errorf("rollback of a handle that never began = %s, want no attempt", got)
	}
	if res, err := replay.GiveUp(ctx); err != nil || res.State != StateAborted {
		t.Errorf("give up = %+v, %v", res, err)
	}
	if got := string(f.lastBody); got != `{"writer":"job","epoch":3,"attempt":"0000000000000002","give_up":true}` {
		t.Errorf("give up's body = %s, want the rollback's with give_up", got)
	}
}

// TestBeginRetriesWhileAFencedAttemptEnds: begin is sent again while the
// server says the attempt it fences is still ending; the Txn gets the
// attempt of the begin that succeeded.
func TestBeginRetriesWhileAFencedAttemptEnds(t *testing.T) {
	f, addr := startFake(t, "")
	c := dialT(t, addr)
	f.mu.Lock()
	f.busy = 2
	f.mu.Unlock()
	tx, err := c.Begin(context.Background(), "job", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	busy, begins := f.busy, f.begins
	f.mu.Unlock()
	if busy != 0 || begins != 1 || tx.Attempt() != "0000000000000001" {
		t.Errorf("after two refusals: busy %d, begins %d, attempt %q; want the third begin's attempt", busy, begins, tx.Attempt())
	}
	// Other refusals are not retried; a cancelled ctx ends the retries.
	f.mu.Lock()
	f.busy = 1000
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Begin(ctx, "job", 2, 0); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("begin while busy past ctx: %v, want FailedPrecondition", err)
	}
}

func TestActions(t *testing.T) {
	_, addr := startFake(t, "")
	c := dialT(t, addr)
	ctx := context.Background()

	eps, err := c.Endpoints(ctx)
	if err != nil || len(eps) != 1 || eps[0].Name != "sink" || eps[0].Sink != "discard" ||
		!slices.Equal(eps[0].Schema, []Field{{Name: "id", Type: "int64", Nullable: true}}) {
		t.Errorf("Endpoints = %+v, %v", eps, err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" || h.Endpoints["sink"] != "ok" {
		t.Errorf("Health = %+v, %v", h, err)
	}
	raw, err := c.Action(ctx, "rollback", json.RawMessage(`{"writer":"w","epoch":1}`))
	if err != nil || string(raw) != `{"epoch":1,"state":"aborted","writer":"w"}` {
		t.Errorf("Action = %s, %v", raw, err)
	}
	if _, err := c.Action(ctx, "nope", nil); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "action nope") {
		t.Errorf("unknown action: %v, want InvalidArgument naming the action", err)
	}
}

func TestDialOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want string
	}{
		{"tls twice", []Option{WithTLS(&tls.Config{}), WithTLSFiles("ca.pem", "", "")}, "both given"},
		{"cert without key", []Option{WithTLSFiles("", "cert.pem", "")}, "both the cert and the key"},
		{"missing ca", []Option{WithTLSFiles(t.TempDir()+"/none.pem", "", "")}, "read CA file"},
		{"negative size", []Option{WithMaxMessageBytes(-1)}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Dial("127.0.0.1:1", tt.opts...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Dial: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestCloseIdempotent(t *testing.T) {
	c, err := Dial("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
