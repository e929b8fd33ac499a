package flightsvc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/internal/descseal"
	"github.com/quiver-ingest/quiver/internal/membudget"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a Service on a real gRPC server on 127.0.0.1, with the auth
// interceptor installed as server/ does, and a client.
type server struct {
	t      testing.TB
	mem    *memory.CheckedAllocator
	svc    *flightsvc.Service
	reg    *prometheus.Registry
	client flight.Client
	sinks  map[string]*discard.Writer
	addr   string // the server's listening address
}

type serverConfig struct {
	// endpoints: name → writer; nil means one discard endpoint "events".
	endpoints       map[string]writers.Writer
	modes           map[string]string // endpoint → mode; none by default
	tokens          []flightsvc.Token
	maxMessageBytes int64
	bufferBytes     int64
	// descriptorKey: zero means a key of this server only.
	descriptorKey descseal.Key
	// streamInterceptors run after auth, around the handler.
	streamInterceptors []grpc.StreamServerInterceptor
	// idle is limits.stream_idle_timeout; 0: none.
	idle time.Duration
	// sqlCatalog and sqlDBSchema are flight_sql's names; "": the defaults.
	sqlCatalog, sqlDBSchema string
	// maintenance: endpoint → its table maintenance; none by default.
	maintenance map[string]flightsvc.Maintenance
	// firstMessage, clientStreams and clientMemory are
	// limits.first_message_timeout, client_max_streams and
	// client_memory_bytes; 0: the defaults.
	firstMessage  time.Duration
	clientStreams int
	clientMemory  int64
	// memory is the budget; nil: the default.
	memory *membudget.Budget
	// shares: endpoint → its share of memory (the one its sink was
	// given); none by default.
	shares map[string]*membudget.Share
	// txn configures the coordinator (Dir is set here).
	txn txn.Options
}

// startServer starts a server; everything is stopped in t.Cleanup, and the
// allocator checked last.
func startServer(t testing.TB, cfg serverConfig) *server {
	t.Helper()
	s := &server{t: t, mem: memory.NewCheckedAllocator(memory.NewGoAllocator()), reg: prometheus.NewRegistry(), sinks: map[string]*discard.Writer{}}
	t.Cleanup(func() { s.mem.AssertSize(t, 0) })
	if cfg.endpoints == nil {
		cfg.endpoints = map[string]writers.Writer{"events": discard.New(nil)}
	}
	var eps []flightsvc.Endpoint
	for name, w := range cfg.endpoints {
		eps = append(eps, flightsvc.Endpoint{Name: name, Sink: "discard", Mode: cfg.modes[name], Writer: w, Maintenance: cfg.maintenance[name], Memory: cfg.shares[name]})
		if d, ok := w.(*discard.Writer); ok {
			s.sinks[name] = d
		}
	}
	cfg.txn.Dir = t.TempDir()
	cfg.txn.OneEpoch = flightsvc.IsSQLWriter
	if cfg.txn.Registerer == nil {
		cfg.txn.Registerer = s.reg // the coordinator's metrics beside the service's (s.metric)
	}
	coord, err := txn.Open(context.Background(), cfg.txn, flightsvc.EndpointWriters(eps))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coord.Close() })
	s.svc, err = flightsvc.New(flightsvc.Options{
		Endpoints:           eps,
		Coordinator:         coord,
		Allocator:           s.mem,
		Registerer:          s.reg,
		MaxMessageBytes:     cfg.maxMessageBytes,
		EndpointBufferBytes: cfg.bufferBytes,
		Tokens:              cfg.tokens,
		DescriptorKey:       cfg.descriptorKey,
		StreamIdleTimeout:   cfg.idle,
		SQLCatalog:          cfg.sqlCatalog,
		SQLDBSchema:         cfg.sqlDBSchema,
		FirstMessageTimeout: cfg.firstMessage,
		ClientMaxStreams:    cfg.clientStreams,
		ClientMemoryBytes:   cfg.clientMemory,
		Memory:              cfg.memory,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.svc.Close)
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(s.svc.MaxRecvMsgSize()),
		grpc.ForceServerCodecV2(flightsvc.NewCodec()),
		grpc.StatsHandler(flightsvc.ConnTagger()),
		grpc.ChainUnaryInterceptor(auth.UnaryServerInterceptor(s.svc.Authenticate)),
		grpc.ChainStreamInterceptor(append([]grpc.StreamServerInterceptor{auth.StreamServerInterceptor(s.svc.Authenticate)}, cfg.streamInterceptors...)...),
	)
	s.svc.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	s.addr = lis.Addr().String()
	s.client = s.dial()
	return s
}

// dial returns a new client of s on a connection of its own, closed by
// the test.
func (s *server) dial() flight.Client {
	s.t.Helper()
	c, err := flight.NewClientWithMiddleware(s.addr, nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// reconnected returns a copy of s whose calls go through a new
// connection: another client of the same server.
func (s *server) reconnected() *server {
	c := *s
	c.client = s.dial()
	return &c
}

func testSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}

// record builds n rows of testSchema.
func (s *server) record(n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(s.mem, testSchema())
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprint("row-", i))
	}
	return b.NewRecordBatch()
}

func pathDesc(endpoint string) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{endpoint}}
}

func cmdDesc(cmd string) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(cmd)}
}

func txnDesc(endpoint, writer string, epoch int64) *flight.FlightDescriptor {
	return cmdDesc(fmt.Sprintf(`{"endpoint":%q,"writer":%q,"epoch":%d}`, endpoint, writer, epoch))
}

// put sends a DoPut stream of batches with rows rows each and returns the
// acks' app_metadata. The records are built and released here.
func (s *server) put(ctx context.Context, desc *flight.FlightDescriptor, rows ...int) ([]string, error) {
	return s.putOn(ctx, s.client, desc, rows...)
}

// putOn is put over the connection c.
func (s *server) putOn(ctx context.Context, c flight.Client, desc *flight.FlightDescriptor, rows ...int) ([]string, error) {
	recs := make([]arrow.RecordBatch, len(rows))
	for i, n := range rows {
		recs[i] = s.record(n)
		defer recs[i].Release()
	}
	return s.putRecordsOn(ctx, c, desc, testSchema(), recs...)
}

func (s *server) putRecords(ctx context.Context, desc *flight.FlightDescriptor, schema *arrow.Schema, recs ...arrow.RecordBatch) ([]string, error) {
	return s.putRecordsOn(ctx, s.client, desc, schema, recs...)
}

func (s *server) putRecordsOn(ctx context.Context, c flight.Client, desc *flight.FlightDescriptor, schema *arrow.Schema, recs ...arrow.RecordBatch) ([]string, error) {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(s.mem))
	w.SetFlightDescriptor(desc)
	for _, r := range recs {
		// A failed Send means the server ended the stream; its status
		// comes with Recv.
		if w.Write(r) != nil {
			break
		}
	}
	_ = w.Close()
	_ = stream.CloseSend()
	return recvAcks(stream)
}

func recvAcks(stream flight.FlightService_DoPutClient) ([]string, error) {
	var acks []string
	for {
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return acks, nil
		}
		if err != nil {
			return acks, err
		}
		acks = append(acks, string(res.GetAppMetadata()))
	}
}

// action runs a DoAction and decodes its one result into a map.
func (s *server) action(ctx context.Context, typ, body string) (map[string]any, error) {
	raw, err := s.actionRaw(ctx, typ, body)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		s.t.Fatalf("action %s: result %s: %v", typ, raw, err)
	}
	return m, nil
}

func (s *server) actionRaw(ctx context.Context, typ, body string) ([]byte, error) {
	stream, err := s.client.DoAction(ctx, &flight.Action{Type: typ, Body: []byte(body)})
	if err != nil {
		return nil, err
	}
	var results [][]byte
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		results = append(results, r.GetBody())
	}
	if len(results) != 1 {
		s.t.Fatalf("action %s: %d results, want 1", typ, len(results))
	}
	return results[0], nil
}

func (s *server) mustAction(typ, body string) map[string]any {
	s.t.Helper()
	m, err := s.action(context.Background(), typ, body)
	if err != nil {
		s.t.Fatalf("action %s %s: %v", typ, body, err)
	}
	return m
}

// metric returns the value of a counter or gauge sample of the registry.
func (s *server) metric(name string, labels map[string]string) float64 {
	s.t.Helper()
	families, err := s.reg.Gather()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	samples:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue samples
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// wantCode checks err's gRPC code and that its message contains every
// fragment.
func wantCode(t testing.TB, err error, code codes.Code, fragments ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("error %v: code %s, want %s", err, st.Code(), code)
	}
	for _, f := range fragments {
		if !strings.Contains(st.Message(), f) {
			t.Fatalf("error message %q does not mention %q", st.Message(), f)
		}
	}
}

func bearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// decode unmarshals an ack or result into a map.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return m
}
