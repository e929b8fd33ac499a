package flightsvc_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/writers"
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

// 100 streams of one token that never send their first message used to
// reserve a whole message each of the memory budget before any byte
// arrived (15 filled 1 GiB): every other client's put then failed after
// limits.admission_timeout. A stream is now charged what it received, so
// another token's put lands while they are open.
func TestSilentStreamsDoNotBlockOthers(t *testing.T) {
	var entered atomic.Int64
	s := startServer(t, serverConfig{
		endpoints:          map[string]writers.Writer{"events": discard.New(nil), "devnull": discard.New(nil)},
		tokens:             tenantTokens,
		streamInterceptors: []grpc.StreamServerInterceptor{countPuts(&entered)},
	})
	hostile, stop := context.WithCancel(bearer(t.Context(), lowSecret))
	defer stop()
	openSilent(t, s, hostile, &entered, 100)

	ctx, cancel := context.WithTimeout(bearer(t.Context(), ownSecret), 2*time.Second)
	defer cancel()
	acks, err := s.put(ctx, pathDesc("events"), 5)
	if err != nil {
		t.Fatalf("a put of another token while 100 silent streams are open: %v", err)
	}
	if got := decode(t, acks[len(acks)-1]); got["committed"] != true {
		t.Fatalf("final ack %v, want committed", got)
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
