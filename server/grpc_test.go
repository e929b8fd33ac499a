package server

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// panicService is a hand-written gRPC service whose one method panics, to
// exercise the interceptor chain without the Flight service.
var panicService = grpc.ServiceDesc{
	ServiceName: "quiver.test.Panic",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Boom",
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			boom := func(context.Context, any) (any, error) { panic("kaboom") }
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/quiver.test.Panic/Boom"}, boom)
		},
	}},
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestInterceptorChain(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	metrics := newGRPCMetrics(reg)
	authFn := func(ctx context.Context) (context.Context, error) {
		if strings.Join(metadataValues(ctx, "authorization"), "") != "Bearer good" {
			return nil, status.Error(codes.Unauthenticated, "missing or wrong token")
		}
		return ctx, nil
	}
	gs := newGRPCServer(4<<20, 8, nil, authFn, metrics, logger)
	gs.RegisterService(&panicService, struct{}{})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	metrics.InitializeMetrics(gs)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(ln) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx := t.Context()

	// The health service answers without credentials.
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without token: %v, %v", resp, err)
	}

	call := func(ctx context.Context) error {
		return conn.Invoke(ctx, "/quiver.test.Panic/Boom", &emptypb.Empty{}, &emptypb.Empty{})
	}
	if err := call(ctx); status.Code(err) != codes.Unauthenticated {
		t.Errorf("call without token: %v, want Unauthenticated", err)
	}
	err = call(withToken(ctx, "good"))
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "the server logged the details") {
		t.Errorf("panicking call: %v, want Internal", err)
	}
	if !strings.Contains(logs.String(), "panic in gRPC handler") || !strings.Contains(logs.String(), "kaboom") {
		t.Errorf("panic not logged:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "level=ERROR msg=\"finished call\"") || !strings.Contains(logs.String(), "level=INFO msg=\"finished call\"") {
		t.Errorf("call log levels: want ERROR for Internal, INFO for Unauthenticated:\n%s", logs.String())
	}
	// The server survived the panic.
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health after panic: %v", err)
	}

	for code, want := range map[string]float64{"Internal": 1, "Unauthenticated": 1} {
		labels := map[string]string{"grpc_service": "quiver.test.Panic", "grpc_method": "Boom", "grpc_code": code}
		if got := metricValue(t, reg, "grpc_server_handled_total", labels); got != want {
			t.Errorf("grpc_server_handled_total%v = %v, want %v", labels, got, want)
		}
	}
}
