package flightsvc

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// handshakeMethod is the full gRPC method name of Flight's Handshake.
var handshakeMethod = "/" + pb.FlightService_ServiceDesc.ServiceName + "/Handshake"

// callerKey is the context key of the authenticated *Token.
type callerKey struct{}

func (s *Service) setTokens(tokens []Token) error {
	if tokens == nil {
		return nil
	}
	s.tokens = make([]Token, 0, len(tokens))
	for _, t := range tokens {
		if t.Secret == "" {
			return writers.Errorf(writers.ErrInvalid, "flightsvc: token %q has an empty secret", t.Name)
		}
		for _, e := range t.Endpoints {
			if e != "*" && s.eps[e] == nil {
				return writers.Errorf(writers.ErrInvalid, "flightsvc: token %q names unknown endpoint %q", t.Name, e)
			}
		}
		for _, a := range t.Actions {
			if a != "*" && s.findAction(a) == nil {
				return writers.Errorf(writers.ErrInvalid, "flightsvc: token %q names unknown action %q (known: %s)", t.Name, a, strings.Join(s.actionNames(), ", "))
			}
		}
		s.tokens = append(s.tokens, t)
	}
	return nil
}

// Authenticate is a go-grpc-middleware auth.AuthFunc: when auth is enabled
// it reads the "authorization: Bearer <token>" metadata, finds the token in
// constant time and stores it in the returned context for the per-endpoint
// and per-action checks. A missing or unknown token is Unauthenticated.
// Health-service calls are not routed through it.
//
// Installing the interceptor is optional: handlers authenticate a call that
// reaches them unauthenticated, so auth cannot be bypassed by omitting it.
func (s *Service) Authenticate(ctx context.Context) (context.Context, error) {
	if s.tokens == nil {
		return ctx, nil
	}
	tok, err := s.tokenFromMetadata(ctx)
	if err != nil {
		return nil, Status(err)
	}
	return context.WithValue(ctx, callerKey{}, tok), nil
}

// AuthFuncOverride implements go-grpc-middleware's
// auth.ServiceAuthFuncOverride, which the auth interceptor prefers to its
// AuthFunc for this service: Handshake is exempt (it checks the token it is
// given in its payload or metadata itself); every other method goes through
// Authenticate.
func (s *Service) AuthFuncOverride(ctx context.Context, fullMethod string) (context.Context, error) {
	if fullMethod == handshakeMethod {
		return ctx, nil
	}
	return s.Authenticate(ctx)
}

// caller returns the call's token: nil when auth is disabled.
func (s *Service) caller(ctx context.Context) (*Token, error) {
	if s.tokens == nil {
		return nil, nil
	}
	if tok, ok := ctx.Value(callerKey{}).(*Token); ok {
		return tok, nil
	}
	return s.tokenFromMetadata(ctx)
}

// allowEndpoint checks that the caller may use endpoint name.
func (s *Service) allowEndpoint(ctx context.Context, name string) error {
	tok, err := s.caller(ctx)
	if err != nil || tok == nil || permits(tok.Endpoints, name) {
		return err
	}
	return writers.Errorf(writers.ErrPermissionDenied, "auth: token %q may not use endpoint %q (it may use: %s)", tok.Name, shown(name), listOrNone(tok.Endpoints))
}

// serverNamed marks ctx for a transaction the server named (Flight SQL's
// BeginTransaction): its writer name is not the client's choice, and so
// is not bound by the token's writer names. The transaction stays its
// owner's alone.
func serverNamed(ctx context.Context) context.Context {
	return txn.WithWriters(ctx, func(string) bool { return true })
}

// withAccess returns ctx carrying the caller's endpoint permissions for
// the coordinator (txn.WithAccess), which checks them against every
// endpoint a transaction touches under the transaction's lock, and the
// caller's identity (txn.WithCaller), which owns the transactions it
// begins and sees no other's. Without auth, ctx is returned as is.
func (s *Service) withAccess(ctx context.Context) (context.Context, error) {
	tok, err := s.caller(ctx)
	if err != nil || tok == nil {
		return ctx, err
	}
	ctx = txn.WithCaller(ctx, tok.Caller())
	ctx = txn.WithWriters(ctx, tok.mayUseWriter)
	return txn.WithAccess(ctx, func(endpoint string) bool { return permits(tok.Endpoints, endpoint) }), nil
}

// allowAction checks that the caller may run action typ.
func (s *Service) allowAction(ctx context.Context, typ string) error {
	tok, err := s.caller(ctx)
	if err != nil || tok == nil || permits(tok.Actions, typ) {
		return err
	}
	return writers.Errorf(writers.ErrPermissionDenied, "auth: token %q may not run action %q (it may run: %s)", tok.Name, typ, listOrNone(tok.Actions))
}

func permits(allowed []string, name string) bool {
	return slices.Contains(allowed, "*") || slices.Contains(allowed, name)
}

func (s *Service) tokenFromMetadata(ctx context.Context) (*Token, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get("authorization")
	if len(values) == 0 {
		return nil, writers.Errorf(writers.ErrUnauthenticated, `auth: missing bearer token: send "authorization: Bearer <token>" metadata (quiver CLI: --token or $QUIVER_TOKEN)`)
	}
	scheme, secret, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return nil, writers.Errorf(writers.ErrUnauthenticated, `auth: the authorization metadata must be "Bearer <token>"`)
	}
	return s.match(strings.TrimSpace(secret))
}

// match finds the token whose secret is secret, comparing with every token
// in constant time so that timing reveals nothing about the secrets.
func (s *Service) match(secret string) (*Token, error) {
	var found *Token
	for i := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(s.tokens[i].Secret), []byte(secret)) == 1 {
			found = &s.tokens[i]
		}
	}
	if found == nil {
		return nil, writers.Errorf(writers.ErrUnauthenticated, "auth: unknown bearer token: check --token or $QUIVER_TOKEN")
	}
	return found, nil
}

// Handshake lets Flight clients that authenticate through the handshake
// work. The token comes from, in order: the "authorization" metadata,
// either "Bearer <token>" or "Basic base64(user:token)" (pyarrow's
// authenticate_basic_token and arrow-go's AuthenticateBasicToken; the
// password is the token, the user name is ignored); or the payload of the
// client's first HandshakeRequest. With auth enabled an unknown or missing
// token is Unauthenticated. The answer carries the token back as the
// payload and as "authorization: Bearer <token>" header metadata, which
// those clients then send on every call. Without auth, Handshake echoes
// whatever it was given.
func (s *Service) Handshake(stream flight.FlightService_HandshakeServer) error {
	secret, err := handshakeSecret(stream)
	if err != nil {
		return Status(err)
	}
	if s.tokens != nil {
		if secret == "" {
			return Status(writers.Errorf(writers.ErrUnauthenticated, "auth: handshake without a token: send it as the payload or as \"authorization: Bearer <token>\" metadata"))
		}
		if _, err := s.match(secret); err != nil {
			return Status(err)
		}
	}
	if secret != "" {
		if err := grpc.SetHeader(stream.Context(), metadata.Pairs("authorization", "Bearer "+secret)); err != nil {
			return Status(err)
		}
	}
	return stream.Send(&flight.HandshakeResponse{Payload: []byte(secret)})
}

func handshakeSecret(stream flight.FlightService_HandshakeServer) (string, error) {
	md, _ := metadata.FromIncomingContext(stream.Context())
	if v := md.Get("authorization"); len(v) > 0 {
		scheme, cred, _ := strings.Cut(strings.TrimSpace(v[0]), " ")
		cred = strings.TrimSpace(cred)
		switch {
		case strings.EqualFold(scheme, "Bearer"):
			return cred, nil
		case strings.EqualFold(scheme, "Basic"):
			raw, err := base64.StdEncoding.DecodeString(cred)
			if err != nil {
				// arrow-go encodes without padding.
				raw, err = base64.RawStdEncoding.DecodeString(cred)
			}
			if err != nil {
				return "", writers.Errorf(writers.ErrUnauthenticated, "auth: basic credentials are not valid base64: %w", err)
			}
			_, password, _ := strings.Cut(string(raw), ":")
			return password, nil
		default:
			return "", writers.Errorf(writers.ErrUnauthenticated, "auth: unsupported authorization scheme %q: use Bearer or Basic", scheme)
		}
	}
	req, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(req.GetPayload()), nil
}
