package flightsvc_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta"
	"github.com/quiver-ingest/quiver/writers/discard"
	"github.com/quiver-ingest/quiver/writers/lance"
)

// putRaw sends msgs as a DoPut stream, the first with desc, and returns
// the acks.
func (s *server) putRaw(ctx context.Context, desc *flight.FlightDescriptor, msgs []*flight.FlightData) ([]string, error) {
	stream, err := s.client.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	for i, m := range msgs {
		fd := &flight.FlightData{DataHeader: m.DataHeader, DataBody: m.DataBody}
		if i == 0 {
			fd.FlightDescriptor = desc
		}
		if stream.Send(fd) != nil {
			break // the server ended the stream; its status comes with Recv
		}
	}
	_ = stream.CloseSend()
	return recvAcks(stream)
}

// One schema message whose children count says 2^30 used to end the
// process (a fatal out of memory in arrow-go). It is refused before
// arrow-go sees it, and a caller without a grant on the endpoint is
// refused before anything is decoded.
func TestHostileSchema(t *testing.T) {
	s := startServer(t, serverConfig{
		endpoints: map[string]writers.Writer{"events": discard.New(nil), "other": discard.New(nil)},
		tokens: []flightsvc.Token{
			{Name: "writer", Secret: "w-secret", Endpoints: []string{"events"}},
			{Name: "stranger", Secret: "s-secret", Endpoints: []string{"other"}},
		},
	})
	bomb := []*flight.FlightData{{DataHeader: flightsvc.ChildrenBomb()}}
	_, err := s.putRaw(bearer(t.Context(), "s-secret"), pathDesc("events"), bomb)
	wantCode(t, err, codes.PermissionDenied, `may not use endpoint "events"`)
	_, err = s.putRaw(bearer(t.Context(), "w-secret"), pathDesc("events"), bomb)
	wantCode(t, err, codes.InvalidArgument, "schema", "1073741824")
	if _, err := s.put(bearer(t.Context(), "w-secret"), pathDesc("events"), 2); err != nil {
		t.Fatalf("the server stopped serving: %v", err)
	}
}

// withGoodBatch puts a valid batch before the hostile one of msgs (a
// schema and a batch of HostileSchema), so that the refusal must roll back
// what the stream had staged.
func (s *server) withGoodBatch(msgs []*flight.FlightData) []*flight.FlightData {
	rec := s.record(2)
	defer rec.Release()
	good := flightsvc.Encode(flightsvc.HostileSchema(), rec)
	return append(good, msgs[1:]...)
}

// Batches that lie about their layout are refused, naming the batch and
// the column, and nothing of their stream is published.
func TestHostileBatches(t *testing.T) {
	s := startServer(t, serverConfig{})
	for name, tt := range map[string]struct {
		msgs      []*flight.FlightData
		fragments []string
	}{
		"negative string offset":          {s.withGoodBatch(flightsvc.NegativeOffset()), []string{"batch 1", `column "name"`, "-3"}},
		"row length -1":                   {s.withGoodBatch(flightsvc.NegativeLength()), []string{"batch 1", "-1 rows"}},
		"two columns for a schema of one": {flightsvc.ExtraColumn(), []string{"batch 0", "2 field nodes", "needs 1"}},
	} {
		t.Run(name, func(t *testing.T) {
			before := s.sinks["events"].Committed().Rows
			_, err := s.putRaw(t.Context(), pathDesc("events"), tt.msgs)
			wantCode(t, err, codes.InvalidArgument, tt.fragments...)
			if got := s.sinks["events"].Committed().Rows; got != before {
				t.Fatalf("%d rows published by a refused stream", got-before)
			}
			if _, err := s.put(t.Context(), pathDesc("events"), 2); err != nil {
				t.Fatalf("the server stopped serving: %v", err)
			}
		})
	}
	if n := s.sinks["events"].OpenKeys(); n != 0 {
		t.Fatalf("%d keys left staged by refused streams", n)
	}
}

// A negative string offset used to panic Delta's Parquet encoder (a
// goroutine of the sink: the process ended) and to land in a Lance file
// no reader could open. It is refused before the sink sees it, and the
// next commit is the next version: nothing was published.
func TestHostileBatchToSinks(t *testing.T) {
	dir := t.TempDir()
	env := func(name string) writers.Env {
		return writers.Env{Endpoint: name, ConfigDir: dir, Allocator: memory.DefaultAllocator}
	}
	dcfg := delta.NewConfig()
	dcfg.TableURI = "file://" + filepath.Join(dir, "table")
	dw, err := delta.New(dcfg, env("table"))
	if err != nil {
		t.Fatal(err)
	}
	lcfg := lance.NewConfig()
	lcfg.DatasetURI = "file://" + filepath.Join(dir, "items.lance")
	lw, err := lance.New(lcfg, env("items"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []writers.Writer{dw, lw} {
		if err := w.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close(context.Background()) })
	}
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"table": dw, "items": lw}})
	version := func(ep string) float64 {
		t.Helper()
		acks, err := s.put(t.Context(), pathDesc(ep), 2)
		if err != nil {
			t.Fatalf("endpoint %s: %v", ep, err)
		}
		return decode(t, acks[len(acks)-1])["version"].(float64)
	}
	for _, ep := range []string{"table", "items"} {
		t.Run(ep, func(t *testing.T) {
			v := version(ep)
			_, err := s.putRaw(t.Context(), pathDesc(ep), s.withGoodBatch(flightsvc.NegativeOffset()))
			wantCode(t, err, codes.InvalidArgument, "batch 1", `column "name"`)
			if next := version(ep); next != v+1 {
				t.Fatalf("version %v after %v: the refused stream published", next, v)
			}
		})
	}
}

// panicky panics in Write on a batch of 13 rows.
type panicky struct{ *discard.Writer }

func (p panicky) Write(ctx context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	if rec.NumRows() == 13 {
		panic("a sink bug")
	}
	return p.Writer.Write(ctx, key, rec)
}

// sendPanics makes a DoPut handler panic in Send when the client asks for
// it (metadata "panic-send"): a panic on the writing side outside Write,
// which gRPC's recovery interceptor turns into Internal.
func sendPanics(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if md, _ := metadata.FromIncomingContext(ss.Context()); len(md.Get("panic-send")) > 0 {
		ss = panicSend{ss}
	}
	return h(srv, ss)
}

type panicSend struct{ grpc.ServerStream }

func (panicSend) SendMsg(any) error { panic("send failed") }

// onPanic answers a recovered panic as server/ does.
var onPanic = recovery.WithRecoveryHandler(func(any) error {
	return status.Error(codes.Internal, "quiver: internal error")
})

// A panic while a stream holds budget used to keep it spent (later puts
// blocked) and leave the receiver stuck (Close never returned). Every exit
// of the DoPut pump gives back what it holds: after many panics the
// budget is whole, puts go through and Close returns.
func TestPanicsReleaseTheBudget(t *testing.T) {
	one := int64(1 << 10) // a batch of 13 rows takes ~400 bytes: two fit, three do not
	s := startServer(t, serverConfig{
		endpoints:          map[string]writers.Writer{"events": panicky{discard.New(nil)}},
		bufferBytes:        one,
		maxMessageBytes:    one / 2,
		streamInterceptors: []grpc.StreamServerInterceptor{recovery.StreamServerInterceptor(onPanic), sendPanics},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i := range 5 {
		_, err := s.put(ctx, pathDesc("events"), 13, 13, 13)
		wantCode(t, err, codes.Internal, "panic", "a sink bug")
		_, err = s.put(metadata.AppendToOutgoingContext(ctx, "panic-send", "1"), pathDesc("events"), 2, 2, 2)
		wantCode(t, err, codes.Internal)
		if _, err := s.put(ctx, pathDesc("events"), 2, 2, 2); err != nil {
			t.Fatalf("round %d: a put after the panics: %v", i, err)
		}
	}
	testpoll.Until(t, "the budget given back", func() bool {
		return s.metric("quiver_buffered_bytes", map[string]string{"endpoint": "events"}) == 0
	})
	closed := make(chan struct{})
	go func() {
		s.svc.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Service.Close did not return: a receiver is stuck")
	}
	if n := s.sinks["events"]; n != nil && n.OpenKeys() != 0 {
		t.Fatalf("%d keys left staged", n.OpenKeys())
	}
}

// The descriptor may come alone, in a message without IPC header, before
// the schema (as some clients send it); it used to reach arrow-go's reader
// as an empty message and fail with a recovered index-out-of-range panic.
func TestDescriptorAloneBeforeTheSchema(t *testing.T) {
	s := startServer(t, serverConfig{})
	rec := s.record(3)
	defer rec.Release()
	msgs := append([]*flight.FlightData{{}}, flightsvc.Encode(rec.Schema(), rec)...)
	acks, err := s.putRaw(t.Context(), pathDesc("events"), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if last := acks[len(acks)-1]; !strings.Contains(last, `"rows":3`) {
		t.Fatalf("acks %v, want 3 rows committed", acks)
	}
}
