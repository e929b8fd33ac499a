package flightsvc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta"
	"github.com/quiver-ingest/quiver/writers/discard"
)

const (
	lowSecret = "s3cret-low"
	ownSecret = "s3cret-tenant"
)

// tenantTokens are two tokens sharing nothing but a discard endpoint, and
// an admin.
var tenantTokens = []flightsvc.Token{
	{Name: "low", Secret: lowSecret, Endpoints: []string{"devnull"}, Actions: []string{"begin", "status", "rollback", "precommit", "commit", "health"}},
	{Name: "tenant", Secret: ownSecret, Endpoints: []string{"events", "devnull"}, Actions: []string{"begin", "status", "rollback", "precommit", "commit", "health"}},
	{Name: "admin", Secret: adminSecret, Endpoints: []string{"*"}, Actions: []string{"*"}},
}

// countPuts is a stream interceptor counting the DoPut handlers entered,
// so that a test knows its streams reached the server.
func countPuts(n *atomic.Int64) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if info.FullMethod == "/arrow.flight.protocol.FlightService/DoPut" {
			n.Add(1)
		}
		return h(srv, ss)
	}
}

// openSilent opens n DoPut streams that send nothing, on one connection,
// and waits until the server runs their handlers.
func openSilent(t *testing.T, s *server, ctx context.Context, entered *atomic.Int64, n int) []flight.FlightService_DoPutClient {
	t.Helper()
	before := entered.Load()
	streams := make([]flight.FlightService_DoPutClient, n)
	for i := range streams {
		st, err := s.client.DoPut(ctx)
		if err != nil {
			t.Fatalf("silent stream %d: %v", i, err)
		}
		streams[i] = st
	}
	testpoll.Until(t, "the silent streams reaching the server", func() bool { return entered.Load() >= before+int64(n) })
	return streams
}

// 100 streams that never send their first message used to reserve a
// whole message each of the memory budget before any byte arrived (15
// filled 1 GiB): every other client's put then failed after
// limits.admission_timeout. A stream is now charged what it received, so
// another client's put lands within a second while they are open: with
// auth, another token's; without, another connection's (the same host's
// client, under limits.client_max_streams).
func TestSilentStreamsDoNotBlockOthers(t *testing.T) {
	for _, auth := range []bool{true, false} {
		t.Run(fmt.Sprintf("auth=%v", auth), func(t *testing.T) {
			var entered atomic.Int64
			cfg := serverConfig{
				endpoints:          map[string]writers.Writer{"events": discard.New(nil), "devnull": discard.New(nil)},
				streamInterceptors: []grpc.StreamServerInterceptor{countPuts(&entered)},
			}
			hostile, other := t.Context(), t.Context()
			if auth {
				cfg.tokens = tenantTokens
				hostile, other = bearer(hostile, lowSecret), bearer(other, ownSecret)
			}
			s := startServer(t, cfg)
			hostile, stop := context.WithCancel(hostile)
			defer stop()
			openSilent(t, s, hostile, &entered, 100)

			ctx, cancel := context.WithTimeout(other, time.Second)
			defer cancel()
			acks, err := s.putOn(ctx, s.dial(), pathDesc("events"), 5)
			if err != nil {
				t.Fatalf("a put of another client while 100 silent streams are open: %v", err)
			}
			if got := decode(t, acks[len(acks)-1]); got["committed"] != true {
				t.Fatalf("final ack %v, want committed", got)
			}
		})
	}
}

// sendSchema sends the descriptor with the schema of testSchema on
// stream, leaving it open.
func (s *server) sendSchema(t *testing.T, stream flight.FlightService_DoPutClient, desc *flight.FlightDescriptor) {
	t.Helper()
	rec := s.record(1)
	defer rec.Release()
	msgs := flightsvc.Encode(testSchema(), rec)
	if err := stream.Send(&flight.FlightData{FlightDescriptor: desc, DataHeader: msgs[0].DataHeader}); err != nil {
		t.Fatal(err)
	}
}

// A stream that sends no first message used to be held open until its
// client left (stream_idle_timeout starts with the schema). It now fails
// after limits.first_message_timeout with DeadlineExceeded naming the key,
// and no longer counts against its client's streams.
func TestFirstMessageTimeout(t *testing.T) {
	s := startServer(t, serverConfig{firstMessage: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	stream, err := s.client.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantCode(t, err, codes.DeadlineExceeded, "limits.first_message_timeout")
	testpoll.Until(t, "the stream no longer counted", func() bool { return s.svc.ClientStreams("peer 127.0.0.1") == 0 })
	if _, err := s.put(ctx, pathDesc("events"), 3); err != nil {
		t.Fatalf("a put after the timeout: %v", err)
	}
}

// gateWriter holds every Write until open is closed, telling entered.
type gateWriter struct {
	writers.Writer
	entered chan struct{}
	open    chan struct{}
}

func (w gateWriter) Write(ctx context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	w.entered <- struct{}{}
	<-w.open
	return w.Writer.Write(ctx, key, rec)
}

// A batch's buffers point into the message it was decoded from, which
// stays in memory whole. A one-row batch sent with a body of 8 MiB (its
// buffers cover a few bytes of it) was charged those few bytes: the budget
// no longer bounded what streams hold. It is now charged the message; a
// compressed batch, its buffers decompressed and its body besides when a
// buffer of it is stored uncompressed (the arrays point into it).
func TestBatchChargedWhatItHolds(t *testing.T) {
	const slack = 8 << 20
	plain := func(s *server) ([]*flight.FlightData, int) {
		rec := s.record(1)
		defer rec.Release()
		msgs := flightsvc.Encode(rec.Schema(), rec)
		msgs[1].DataBody = append(msgs[1].DataBody, make([]byte, slack)...)
		return msgs, len(msgs[1].DataBody)
	}
	// 2 MiB of random ids stored uncompressed, 2 MiB of zeros compressed
	// to a few bytes, 2 MiB of slack: the batch holds the body and the
	// zeros decompressed.
	compressed := func(s *server) ([]*flight.FlightData, int) {
		const rows = 256 << 10
		b := array.NewRecordBuilder(s.mem, arrow.NewSchema([]arrow.Field{
			{Name: "random", Type: arrow.PrimitiveTypes.Int64}, {Name: "zeros", Type: arrow.PrimitiveTypes.Int64}}, nil))
		defer b.Release()
		r := rand.New(rand.NewPCG(1, 2))
		for range rows {
			b.Field(0).(*array.Int64Builder).Append(r.Int64())
			b.Field(1).(*array.Int64Builder).Append(0)
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		msgs := flightsvc.EncodeWith([]ipc.Option{ipc.WithZstd(), ipc.WithMinSpaceSavings(0.5)}, rec.Schema(), rec)
		if n := len(msgs[1].DataBody); n > rows*8+4096 {
			t.Fatalf("a body of %d bytes: the random ids were compressed, or the zeros not", n)
		}
		msgs[1].DataBody = append(msgs[1].DataBody, make([]byte, 2<<20)...)
		return msgs, len(msgs[1].DataBody) + rows*8
	}
	for name, build := range map[string]func(*server) ([]*flight.FlightData, int){"slack": plain, "compressed": compressed} {
		t.Run(name, func(t *testing.T) {
			budget, err := membudget.New(membudget.Options{Limit: 64 << 20, MaxOpenFiles: 16, AdmissionTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			gate := gateWriter{Writer: discard.New(nil), entered: make(chan struct{}), open: make(chan struct{})}
			s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": gate}, maxMessageBytes: 16 << 20, memory: budget})
			msgs, holds := build(s)
			done := make(chan error, 1)
			go func() {
				_, err := s.putRaw(t.Context(), pathDesc("events"), msgs)
				done <- err
			}()
			<-gate.entered // the batch is in Write, decoded
			held := budget.Used(membudget.Decoded)
			close(gate.open)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if held < int64(holds) {
				t.Fatalf("a batch holding %d bytes was charged %d", holds, held)
			}
			testpoll.Until(t, "the batch's charge given back", func() bool { return budget.Used(membudget.Decoded) == 0 })
		})
	}
}

// A client that sends batches and never reads their acks fills its HTTP/2
// window; the server's ack Send then waits for as long as the client stays,
// and the stream held its queued and decoded batches meanwhile (the idle
// timer runs only while the server waits for a message). A Send that waits
// longer than limits.stream_idle_timeout now cancels the stream, which
// gives back everything it holds while the client still reads nothing.
func TestUnreadAcksReleaseTheStream(t *testing.T) {
	const idle = 200 * time.Millisecond
	budget, err := membudget.New(membudget.Options{Limit: 256 << 20, MaxOpenFiles: 16, AdmissionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverConfig{idle: idle, memory: budget})
	// Fixed windows (no BDP growth): the client's takes about 2,000 acks.
	c, err := flight.NewClientWithMiddleware(s.addr, nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stream, err := c.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := s.record(1000)
	defer rec.Release()
	var sent atomic.Int64
	go func() { // blocks once the server stops reading; ends with the stream
		w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
		w.SetFlightDescriptor(pathDesc("events"))
		for sent.Load() < 100_000 && w.Write(rec) == nil {
			sent.Add(1)
		}
	}()
	held := func() int64 { return budget.Used(membudget.Received) + budget.Used(membudget.Decoded) }
	// Until the client's sends have stopped for twice the idle timeout
	// (the server stopped reading: its ack Send waits) and the stream
	// holds nothing.
	last, since := int64(-1), time.Now()
	testpoll.Until(t, "the stream's client stalled and everything it held given back", func() bool {
		if n := sent.Load(); n != last {
			last, since = n, time.Now()
		}
		return last > 0 && time.Since(since) > 2*idle && held() == 0
	})
	_, err = recvAcks(stream)
	wantCode(t, err, codes.DeadlineExceeded, "the client took no ack", "limits.stream_idle_timeout")
}

// A stream that sent its descriptor alone and went silent waited for the
// schema with a whole message reserved and no timer (the idle timer starts
// with the schema), until its client left: a few such streams held the
// budget. The schema is now read within limits.first_message_timeout too,
// unreserved; the stream fails with DeadlineExceeded and holds nothing.
func TestDescriptorAloneThenSilence(t *testing.T) {
	budget, err := membudget.New(membudget.Options{Limit: 64 << 20, MaxOpenFiles: 16, AdmissionTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverConfig{firstMessage: 300 * time.Millisecond, maxMessageBytes: 4 << 20, memory: budget})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	stream, err := s.client.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&flight.FlightData{FlightDescriptor: pathDesc("events")}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantCode(t, err, codes.DeadlineExceeded, "limits.first_message_timeout")
	testpoll.Until(t, "the stream no longer counted", func() bool { return s.svc.ClientStreams("peer 127.0.0.1") == 0 })
	if n := budget.Used(membudget.Received); n != 0 {
		t.Fatalf("%d bytes still reserved after the stream failed", n)
	}

	// A second message without an IPC header is refused at once.
	stream, err = s.client.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := stream.Send(&flight.FlightData{FlightDescriptor: pathDesc("events")}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = stream.Recv()
	wantCode(t, err, codes.InvalidArgument, "message 2 carries no IPC header")
}

// One token could open any number of streams. At limits.client_max_streams
// the next is ResourceExhausted naming the key, while other tokens still
// put.
func TestClientStreamQuota(t *testing.T) {
	var entered atomic.Int64
	s := startServer(t, serverConfig{
		endpoints:          map[string]writers.Writer{"events": discard.New(nil), "devnull": discard.New(nil)},
		tokens:             tenantTokens,
		clientStreams:      2,
		streamInterceptors: []grpc.StreamServerInterceptor{countPuts(&entered)},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	low := bearer(ctx, lowSecret)
	openSilent(t, s, low, &entered, 2)
	testpoll.Until(t, "two streams of token low counted", func() bool { return s.svc.ClientStreams("token low") == 2 })

	_, err := s.put(low, pathDesc("devnull"), 3)
	wantCode(t, err, codes.ResourceExhausted, `token low`, "limits.client_max_streams")
	if _, err := s.put(bearer(ctx, ownSecret), pathDesc("devnull"), 3); err != nil {
		t.Fatalf("another token's put: %v", err)
	}
}

// One token's streams that sent their schema and then wait hold the
// reservation of their next message each; without a quota they could hold
// the whole budget. At limits.client_memory_bytes the token's next stream
// waits limits.admission_timeout and fails naming the key; another token's
// put goes through meanwhile.
func TestClientMemoryQuota(t *testing.T) {
	const maxMsg = 1 << 20 // a stream reserves 2 MiB before each message
	budget, err := membudget.New(membudget.Options{Limit: 64 << 20, MaxOpenFiles: 16, AdmissionTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverConfig{
		endpoints:       map[string]writers.Writer{"events": discard.New(nil), "devnull": discard.New(nil)},
		tokens:          tenantTokens,
		maxMessageBytes: maxMsg,
		clientMemory:    2 * maxMsg,
		memory:          budget,
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	low := bearer(ctx, lowSecret)
	waiting, err := s.client.DoPut(low)
	if err != nil {
		t.Fatal(err)
	}
	s.sendSchema(t, waiting, pathDesc("devnull"))
	testpoll.Until(t, "the waiting stream holding its reservation", func() bool {
		return budget.Used(membudget.Received) >= 2*maxMsg
	})

	_, err = s.put(low, pathDesc("devnull"), 3)
	wantCode(t, err, codes.ResourceExhausted, `client "token low"`, "limits.client_memory_bytes")
	if _, err := s.put(bearer(ctx, ownSecret), pathDesc("events"), 3); err != nil {
		t.Fatalf("another token's put: %v", err)
	}
}

// deltaEndpoints are Delta tables named names, whose sinks take their
// file writer slots from budget.
func deltaEndpoints(t *testing.T, budget *membudget.Budget, names ...string) (map[string]writers.Writer, map[string]*membudget.Share) {
	dir := t.TempDir()
	eps, shares := map[string]writers.Writer{}, map[string]*membudget.Share{}
	for _, name := range names {
		shares[name] = budget.Share(name, 0)
		cfg := delta.NewConfig()
		cfg.TableURI = "file://" + filepath.Join(dir, name)
		w, err := delta.New(cfg, writers.Env{Endpoint: name, ConfigDir: dir, Allocator: memory.DefaultAllocator, Memory: shares[name]})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close(context.Background()) })
		eps[name] = w
	}
	return eps, shares
}

// One token staging a row in each of many transactions on a Delta table
// held a file writer slot per transaction until they expired (a week),
// so every other token's put to any table waited for a slot and failed.
// With limits.client_open_files a token's slots are bounded once free
// slots run low: its further transactions fail naming the quota, and
// another token's put to its own table lands. Its open transactions are
// bounded too (limits.client_max_transactions).
func TestTenantCannotHoldEveryFileSlot(t *testing.T) {
	budget, err := membudget.New(membudget.Options{Limit: 256 << 20, MaxOpenFiles: 8, ClientFiles: 2, AdmissionTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eps, shares := deltaEndpoints(t, budget, "low_table", "own_table")
	s := startServer(t, serverConfig{
		endpoints: eps, shares: shares, memory: budget,
		tokens: []flightsvc.Token{
			{Name: "low", Secret: lowSecret, Endpoints: []string{"low_table"}, Actions: []string{"*"}},
			{Name: "own", Secret: ownSecret, Endpoints: []string{"own_table"}, Actions: []string{"*"}},
		},
		txn: txn.Options{MaxOpenPerOwner: 12},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	low := bearer(ctx, lowSecret)
	var refused error
	for epoch := range 12 {
		if _, err := s.put(low, txnDesc("low_table", fmt.Sprintf("w%d", epoch), 1), 1); err != nil {
			refused = err
			break
		}
	}
	wantCode(t, refused, codes.ResourceExhausted, `client "token low"`, "limits.client_open_files")
	if open, _ := budget.OpenFiles(); open == 8 {
		t.Fatalf("token low holds all %d file slots", open)
	}
	if _, err := s.put(bearer(ctx, ownSecret), pathDesc("own_table"), 3); err != nil {
		t.Fatalf("another token's put while low holds its slots: %v", err)
	}
	for i := 0; err == nil && i < 20; i++ {
		_, err = s.action(low, "begin", fmt.Sprintf(`{"writer":"x%d","epoch":1}`, i))
	}
	wantCode(t, err, codes.ResourceExhausted, `"low" already has 12 open`, "limits.client_max_transactions")
}

// A token's open transactions could stage any number of bytes for as
// long as their ttl. limits.client_staged_bytes bounds what its live
// transactions were written: the batch beyond fails naming the key,
// another token stages meanwhile, and a rollback gives the bytes back.
func TestClientStagedBytesQuota(t *testing.T) {
	s := startServer(t, serverConfig{
		endpoints: map[string]writers.Writer{"events": discard.New(nil), "devnull": discard.New(nil)},
		tokens:    tenantTokens,
		txn:       txn.Options{MaxStagedPerOwner: 8 << 10},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	low, own := bearer(ctx, lowSecret), bearer(ctx, ownSecret)
	if _, err := s.put(low, txnDesc("devnull", "w", 1), 20, 20); err != nil {
		t.Fatalf("staging within the quota: %v", err)
	}
	_, err := s.put(low, txnDesc("devnull", "v", 1), 100, 100, 100, 100, 100)
	wantCode(t, err, codes.ResourceExhausted, `"low" has`, "limits.client_staged_bytes")
	if _, err := s.put(own, txnDesc("devnull", "mine", 1), 100, 100, 100); err != nil {
		t.Fatalf("another token's staging: %v", err)
	}
	for _, w := range []string{"w", "v"} {
		if _, err := s.action(low, "rollback", fmt.Sprintf(`{"writer":%q,"epoch":1}`, w)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.put(low, txnDesc("devnull", "w", 2), 100); err != nil {
		t.Fatalf("staging after the rollbacks: %v", err)
	}
}
