package server

import (
	"context"
	"crypto/tls"
	"log/slog"
	"runtime/debug"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/flightsvc"
)

// connWindowBytes is the gRPC connection's receive window.
const connWindowBytes = 16 << 20

// newGRPCServer builds the Flight listener's gRPC server with its limits
// (maxRecv: the Flight service's MaxRecvMsgSize, which leaves room beyond
// limits.max_message_bytes so that flightsvc, not gRPC, rejects an
// oversized batch with a message naming the limit), credentials and
// interceptor chain, outermost first:
//
//   - metrics: every call is counted, including rejected ones;
//   - logging: one line per finished call, Debug when OK, Info otherwise
//     (Error for Internal/DataLoss);
//   - auth: authFn on every call but the gRPC health service, which load
//     balancers call without credentials (a service implementing
//     auth.ServiceAuthFuncOverride, as flightsvc does to exempt Handshake,
//     decides for itself);
//   - recovery: a handler panic becomes Internal and is logged with its
//     stack, and the server keeps serving.
//
// extra are further options (the tracing stats handler).
func newGRPCServer(maxRecv int, maxStreams uint32, tc *tls.Config, authFn auth.AuthFunc, metrics *grpcprom.ServerMetrics, logger *slog.Logger, extra ...grpc.ServerOption) *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxRecv),
		grpc.MaxConcurrentStreams(maxStreams),
		// Fixed windows: gRPC's dynamic ones grow to 16 MiB per stream,
		// buffered outside the memory budget. A stream's window stays
		// small; the connection's is only a throughput knob (gRPC
		// returns it as data arrives, not as streams read).
		grpc.InitialWindowSize(flightsvc.StreamWindowBytes),
		grpc.InitialConnWindowSize(connWindowBytes),
		// A received batch is held once, not three times (see Codec).
		grpc.ForceServerCodecV2(flightsvc.NewCodec()),
		// HTTP/2 frames are read into buffers gRPC does not clear first.
		experimental.BufferPool(flightsvc.NewRecvPool()),
		// Stop must not return while a DoPut handler still runs: the
		// writers close right after, and the handler's rollback needs them.
		grpc.WaitForHandlers(true),
	}
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	callLog := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		logger.Log(ctx, slog.Level(lvl), msg, fields...)
	})
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(callLevel),
	}
	needsAuth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.Service != healthpb.Health_ServiceDesc.ServiceName
	})
	onPanic := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		logger.ErrorContext(ctx, "panic in gRPC handler", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "quiver: internal error (the server logged the details)")
	})
	opts = append(opts,
		grpc.StatsHandler(flightsvc.ConnTagger()),
		grpc.ChainUnaryInterceptor(
			metrics.UnaryServerInterceptor(),
			logging.UnaryServerInterceptor(callLog, logOpts...),
			selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(authFn), needsAuth),
			recovery.UnaryServerInterceptor(onPanic),
		),
		grpc.ChainStreamInterceptor(
			metrics.StreamServerInterceptor(),
			logging.StreamServerInterceptor(callLog, logOpts...),
			selector.StreamServerInterceptor(auth.StreamServerInterceptor(authFn), needsAuth),
			recovery.StreamServerInterceptor(onPanic),
		),
	)
	return grpc.NewServer(append(opts, extra...)...)
}

func callLevel(code codes.Code) logging.Level {
	switch code {
	case codes.OK:
		return logging.LevelDebug
	case codes.Internal, codes.DataLoss:
		return logging.LevelError
	}
	return logging.LevelInfo
}

// newGRPCMetrics returns the gRPC server metrics (grpc_server_handled_total
// and friends, with handling-time histograms) registered on reg.
func newGRPCMetrics(reg prometheus.Registerer) *grpcprom.ServerMetrics {
	m := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	reg.MustRegister(m)
	return m
}
