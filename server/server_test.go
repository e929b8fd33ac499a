package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
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
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/server/endpoint"
	"github.com/quiver-ingest/quiver/writers/discard"
	"github.com/quiver-ingest/quiver/writers/lance"
)

// testServer is a started server on 127.0.0.1 ports chosen by the kernel,
// with a checked allocator and captured logs.
type testServer struct {
	*Server
	logs *syncBuffer
}

// startServer starts a server for the config body yaml (listen addresses
// and data_dir are added) and shuts it down in t.Cleanup, checking that no
// Arrow memory is left.
func startServer(t *testing.T, yaml string) *testServer {
	t.Helper()
	return startServerIn(t, t.TempDir(), yaml)
}

// startServerIn is startServer with the config's folder dir (data_dir is
// dir/data), for tests that restart a server on the same data.
func startServerIn(t *testing.T, dir, yaml string) *testServer {
	t.Helper()
	return startServerWith(t, dir, yaml, Options{})
}

// startServerWith is startServerIn with opts (Logger, Allocator and
// Version are set here).
func startServerWith(t *testing.T, dir, yaml string, opts Options) *testServer {
	t.Helper()
	doc := "listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: data\n" + yaml
	cfg, err := config.Parse([]byte(doc), dir, Sinks())
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Allocator = mem
	opts.Version = "v-test"
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Tests that force a shutdown already checked its error.
		if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("shutdown: %v", err)
		}
		mem.AssertSize(t, 0)
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return &testServer{Server: s, logs: logs}
}

// committedRows is what the discard endpoint called name has published.
func (s *testServer) committedRows(t *testing.T, name string) int64 {
	t.Helper()
	for _, e := range s.endpoints {
		if e.Name == name {
			return e.Writer.(*endpoint.Writer).Unwrap().(*discard.Writer).Committed().Rows
		}
	}
	t.Fatalf("no endpoint %q", name)
	return 0
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	return httpGetToken(t, url, "")
}

// httpGetToken is httpGet with a bearer token ("" for none).
func httpGetToken(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// putStream is a client DoPut stream to a PATH descriptor.
type putStream struct {
	stream flight.FlightService_DoPutClient
	w      *flight.Writer
	mem    *memory.CheckedAllocator
	schema *arrow.Schema
}

func openPut(t *testing.T, ctx context.Context, conn *grpc.ClientConn, endpoint string) *putStream {
	t.Helper()
	stream, err := flight.NewClientFromConn(conn, nil).DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{endpoint}})
	p := &putStream{stream: stream, w: w, mem: mem, schema: schema}
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return p
}

// send writes one batch of rows ids.
func (p *putStream) send(t *testing.T, rows int) error {
	t.Helper()
	b := array.NewInt64Builder(p.mem)
	defer b.Release()
	for i := range rows {
		b.Append(int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(p.schema, []arrow.Array{col}, int64(rows))
	defer rec.Release()
	return p.w.Write(rec)
}

// ack reads the next PutResult's metadata.
func (p *putStream) ack() (map[string]any, error) {
	res, err := p.stream.Recv()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(res.AppMetadata, &m)
}

// finish ends the stream and returns the final ack.
func (p *putStream) finish(t *testing.T) map[string]any {
	t.Helper()
	if err := p.w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	for {
		m, err := p.ack()
		if err == io.EOF {
			return last
		}
		if err != nil {
			t.Fatalf("put: %v", err)
		}
		last = m
	}
}

const twoEndpoints = "endpoints:\n  - {name: devnull, sink: discard}\n  - {name: events, sink: discard}\n"

func TestServeOperations(t *testing.T) {
	s := startServer(t, twoEndpoints)
	base := "http://" + s.HTTPAddr()

	addr := regexp.QuoteMeta(s.FlightAddr())
	if !regexp.MustCompile(`msg="flight listening" addr=` + addr).MatchString(s.logs.String()) {
		t.Errorf("no flight listening line with %s in:\n%s", s.FlightAddr(), s.logs.String())
	}
	if !strings.Contains(s.logs.String(), `msg="http listening" addr=`+s.HTTPAddr()) {
		t.Errorf("no http listening line in:\n%s", s.logs.String())
	}

	if code, body := httpGet(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/"); code != 200 || !strings.Contains(body, "<title>Quiver status</title>") {
		t.Errorf("status page = %d:\n%s", code, body)
	}
	code, body := httpGet(t, base+"/api/status")
	for _, want := range []string{`"version": "v-test"`, `"state": "serving"`, `"flight": "` + s.FlightAddr() + ` (plaintext)"`, `"transactions": []`, `"name": "devnull"`, `"name": "events"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/api/status (%d) lacks %q:\n%s", code, want, body)
		}
	}
	if code, _ := httpGet(t, base+"/nope"); code != 404 {
		t.Errorf("/nope = %d, want 404", code)
	}

	conn := dial(t, s.FlightAddr())
	resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("grpc health: %v %v", resp, err)
	}
	_, metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{
		`quiver_build_info{goversion="`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 1`,
		"go_goroutines", "process_cpu_seconds_total",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestPutWithToken(t *testing.T) {
	t.Setenv("QUIVER_TEST_SERVER_TOKEN", "s3cret")
	s := startServer(t, twoEndpoints+"auth:\n  tokens:\n    - {name: ingest, token_env: QUIVER_TEST_SERVER_TOKEN, endpoints: [devnull], actions: []}\n")
	conn := dial(t, s.FlightAddr())
	ctx := t.Context()

	p := openPut(t, withToken(ctx, "s3cret"), conn, "devnull")
	for range 3 {
		if err := p.send(t, 100); err != nil {
			t.Fatal(err)
		}
	}
	final := p.finish(t)
	if final["committed"] != true || final["rows"] != float64(300) {
		t.Errorf("final ack = %v, want committed 300 rows", final)
	}
	if got := s.committedRows(t, "devnull"); got != 300 {
		t.Errorf("devnull committed %d rows, want 300", got)
	}

	for name, ctx := range map[string]context.Context{"no token": ctx, "wrong token": withToken(ctx, "guess")} {
		t.Run(name, func(t *testing.T) {
			// ListFlights is a server stream: its status comes with Recv.
			stream, err := flight.NewClientFromConn(conn, nil).ListFlights(ctx, &flight.Criteria{})
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("ListFlights: %v, want Unauthenticated", err)
			}
		})
	}
	// The token may not write to events.
	p = openPut(t, withToken(ctx, "s3cret"), conn, "events")
	p.send(t, 10)
	p.w.Close()
	p.stream.CloseSend()
	for {
		if _, err := p.ack(); err != nil {
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("put to a forbidden endpoint: %v, want PermissionDenied", err)
			}
			break
		}
	}
	// The health service needs no token.
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without token: %v", err)
	}
}

func TestShutdownDrainsFinishingStreams(t *testing.T) {
	s := startServer(t, twoEndpoints)
	conn := dial(t, s.FlightAddr())
	p := openPut(t, t.Context(), conn, "devnull")
	if err := p.send(t, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ack(); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	testpoll.Until(t, "/readyz to report not ready", func() bool {
		code, _ := httpGet(t, "http://"+s.HTTPAddr()+"/readyz")
		return code == http.StatusServiceUnavailable
	})
	resp, err := s.health.Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health while draining: %v %v, want NOT_SERVING", resp, err)
	}
	// The stream still in flight may finish, and its rows are published.
	if final := p.finish(t); final["committed"] != true {
		t.Errorf("final ack while draining = %v", final)
	}
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if got := s.committedRows(t, "devnull"); got != 50 {
		t.Errorf("committed %d rows, want 50", got)
	}
}

func TestShutdownCancelsUnfinishedStreams(t *testing.T) {
	s := startServer(t, twoEndpoints)
	conn := dial(t, s.FlightAddr())
	p := openPut(t, t.Context(), conn, "devnull")
	if err := p.send(t, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ack(); err != nil { // the server holds the batch
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("shutdown = %v, want the deadline error", err)
	}
	if got := s.committedRows(t, "devnull"); got != 0 {
		t.Errorf("an unfinished stream published %d rows", got)
	}
	if _, err := p.ack(); err == nil || err == io.EOF {
		t.Errorf("client stream after forced shutdown: %v, want an error", err)
	}
	p.w.Close()
	// Idempotent: a second call returns the first result at once.
	if err := s.Shutdown(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second shutdown = %v", err)
	}
}

func TestStartFailsOnBusyPort(t *testing.T) {
	s := startServer(t, twoEndpoints)
	cfg, err := config.Parse([]byte("listen: "+s.FlightAddr()+"\nhttp_listen: 127.0.0.1:0\n"+twoEndpoints), t.TempDir(), Sinks())
	if err != nil {
		t.Fatal(err)
	}
	s2, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = s2.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "listen "+s.FlightAddr()) {
		t.Errorf("start on a busy port: %v", err)
	}
	if err := s2.Shutdown(t.Context()); err != nil {
		t.Errorf("shutdown after failed start: %v", err)
	}
}

func TestShutdownWithoutStart(t *testing.T) {
	cfg, err := config.Parse([]byte(twoEndpoints), t.TempDir(), Sinks())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err == nil {
		t.Error("start after shutdown succeeded")
	}
	if s.FlightAddr() != "" || s.HTTPAddr() != "" {
		t.Errorf("addresses of a server never started: %q %q", s.FlightAddr(), s.HTTPAddr())
	}
}

func TestServeStopsWhenContextEnds(t *testing.T) {
	cfg, err := parseTestConfig(t, twoEndpoints)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	testpoll.Until(t, "the server to listen", func() bool { return s.serving.Load() })
	if code, _ := httpGet(t, "http://"+s.HTTPAddr()+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
}

func TestQuickstartConfig(t *testing.T) {
	cfg, err := config.Load("../examples/quickstart.yaml", Sinks())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8815" || cfg.HTTPListen != "127.0.0.1:9815" {
		t.Errorf("quickstart listens on %s and %s", cfg.Listen, cfg.HTTPListen)
	}
	if len(cfg.Endpoints) == 0 || cfg.Endpoints[0].Name != "devnull" || cfg.Endpoints[0].Sink != "discard" {
		t.Errorf("quickstart endpoints = %+v", cfg.Endpoints)
	}
	// The quickstart's Lance endpoint merges on id (issue 7).
	var items *lance.Config
	for _, e := range cfg.Endpoints {
		if e.Name == "items" {
			items, _ = e.Settings.(*lance.Config)
		}
	}
	if items == nil || items.WriteMode != lance.ModeMergeInsert || !slices.Equal(items.On, []string{"id"}) ||
		items.WhenMatched != "update_all" || items.WhenNotMatched != "insert_all" {
		t.Errorf("quickstart items endpoint = %+v, want a Lance merge_insert on [id], update_all + insert_all", items)
	}
	results, err := Check(t.Context(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("check %s: %v", r.Endpoint, r.Err)
		}
	}
}
