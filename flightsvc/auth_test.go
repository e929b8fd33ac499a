package flightsvc_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

const (
	ingestSecret = "s3cret-ingest"
	adminSecret  = "s3cret-admin"
)

func startAuthServer(t *testing.T) *server {
	return startServer(t, serverConfig{
		endpoints: map[string]writers.Writer{"events": discard.New(nil), "users": discard.New(nil)},
		tokens: []flightsvc.Token{
			{Name: "ingest", Secret: ingestSecret, Endpoints: []string{"events"}, Actions: []string{"precommit", "commit", "endpoints"}},
			{Name: "admin", Secret: adminSecret, Endpoints: []string{"*"}, Actions: []string{"*"}},
		},
	})
}

func TestAuth(t *testing.T) {
	s := startAuthServer(t)
	ingest := func(ctx context.Context) context.Context { return bearer(ctx, ingestSecret) }
	tests := []struct {
		name      string
		call      func(context.Context) error
		code      codes.Code
		fragments []string
	}{
		{"missing token", func(ctx context.Context) error {
			_, err := s.put(ctx, pathDesc("events"), 1)
			return err
		}, codes.Unauthenticated, []string{"missing bearer token", "QUIVER_TOKEN"}},
		{"wrong token", func(ctx context.Context) error {
			_, err := s.action(bearer(ctx, "guess"), "health", "")
			return err
		}, codes.Unauthenticated, []string{"unknown bearer token"}},
		{"not a bearer token", func(ctx context.Context) error {
			_, err := s.action(metadata.AppendToOutgoingContext(ctx, "authorization", "Token x"), "health", "")
			return err
		}, codes.Unauthenticated, []string{"Bearer <token>"}},
		{"action not permitted", func(ctx context.Context) error {
			_, err := s.action(ingest(ctx), "rollback", `{"writer":"w","epoch":1}`)
			return err
		}, codes.PermissionDenied, []string{`token "ingest"`, `action "rollback"`}},
		{"endpoint not permitted for doput", func(ctx context.Context) error {
			_, err := s.put(ingest(ctx), pathDesc("users"), 1)
			return err
		}, codes.PermissionDenied, []string{`token "ingest"`, `endpoint "users"`}},
		{"endpoint not permitted for getschema", func(ctx context.Context) error {
			_, err := s.client.GetSchema(ingest(ctx), pathDesc("users"))
			return err
		}, codes.PermissionDenied, []string{`endpoint "users"`}},
		{"endpoint not permitted for handed descriptors", func(ctx context.Context) error {
			_, err := s.action(ingest(ctx), "commit", `{"writer":"w","epoch":1,"descriptors":{"users":[""]}}`)
			return err
		}, codes.PermissionDenied, []string{`endpoint "users"`}},
		{"listing without a token", func(ctx context.Context) error {
			stream, err := s.client.ListFlights(ctx, &flight.Criteria{})
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}, codes.Unauthenticated, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, tt.call(t.Context()), tt.code, tt.fragments...)
		})
	}

	// Permitted calls work.
	if _, err := s.put(bearer(t.Context(), ingestSecret), pathDesc("events"), 4); err != nil {
		t.Fatalf("permitted put: %v", err)
	}
	raw, err := s.actionRaw(bearer(t.Context(), ingestSecret), "endpoints", "")
	if err != nil {
		t.Fatal(err)
	}
	var eps []map[string]any
	if err := json.Unmarshal(raw, &eps); err != nil || len(eps) != 1 || eps[0]["name"] != "events" {
		t.Fatalf("endpoints for ingest = %s, want only events", raw)
	}
	if _, err := s.action(bearer(t.Context(), adminSecret), "rollback", `{"writer":"w","epoch":1}`); err != nil {
		t.Fatalf("admin rollback: %v", err)
	}
	if got := s.sinks["events"].Committed().Rows; got != 4 {
		t.Fatalf("committed %d rows, want 4", got)
	}
}

func TestHandshake(t *testing.T) {
	s := startAuthServer(t)

	t.Run("basic token", func(t *testing.T) {
		// pyarrow's authenticate_basic_token and arrow-go's
		// AuthenticateBasicToken: the password is the token.
		ctx, err := s.client.AuthenticateBasicToken(t.Context(), "anyone", ingestSecret)
		if err != nil {
			t.Fatal(err)
		}
		stream, err := s.client.ListFlights(ctx, &flight.Criteria{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for {
			info, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, info.GetFlightDescriptor().GetPath()[0])
		}
		if !reflect.DeepEqual(names, []string{"events"}) {
			t.Fatalf("flights for ingest = %v, want [events]", names)
		}
	})

	t.Run("payload", func(t *testing.T) {
		stream, err := s.client.Handshake(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&flight.HandshakeRequest{Payload: []byte(adminSecret)}); err != nil {
			t.Fatal(err)
		}
		res, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if string(res.GetPayload()) != adminSecret {
			t.Fatalf("handshake payload %q, want the token", res.GetPayload())
		}
		header, err := stream.Header()
		if err != nil {
			t.Fatal(err)
		}
		if got := header.Get("authorization"); !reflect.DeepEqual(got, []string{"Bearer " + adminSecret}) {
			t.Fatalf("handshake authorization header %q", got)
		}
	})

	t.Run("wrong token", func(t *testing.T) {
		_, err := s.client.AuthenticateBasicToken(t.Context(), "anyone", "guess")
		wantCode(t, err, codes.Unauthenticated, "unknown bearer token")
	})

	t.Run("no token", func(t *testing.T) {
		stream, err := s.client.Handshake(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.CloseSend()
		_, err = stream.Recv()
		wantCode(t, err, codes.Unauthenticated, "without a token")
	})
}

func TestNewValidates(t *testing.T) {
	coord := openCoordinator(t)
	w := discard.New(nil)
	ok := []flightsvc.Endpoint{{Name: "events", Sink: "discard", Writer: w}}
	tests := []struct {
		name     string
		opts     flightsvc.Options
		contains string
	}{
		{"no coordinator", flightsvc.Options{Endpoints: ok}, "Coordinator"},
		{"bad endpoint name", flightsvc.Options{Coordinator: coord, Endpoints: []flightsvc.Endpoint{{Name: "-x", Writer: w}}}, `"-x"`},
		{"duplicate endpoint", flightsvc.Options{Coordinator: coord, Endpoints: append(ok, ok...)}, "twice"},
		{"endpoint without writer", flightsvc.Options{Coordinator: coord, Endpoints: []flightsvc.Endpoint{{Name: "x"}}}, "no writer"},
		{"token without secret", flightsvc.Options{Coordinator: coord, Endpoints: ok, Tokens: []flightsvc.Token{{Name: "t"}}}, "empty secret"},
		{"token with unknown endpoint", flightsvc.Options{Coordinator: coord, Endpoints: ok, Tokens: []flightsvc.Token{{Name: "t", Secret: "s", Endpoints: []string{"nope"}}}}, `"nope"`},
		{"token with unknown action", flightsvc.Options{Coordinator: coord, Endpoints: ok, Tokens: []flightsvc.Token{{Name: "t", Secret: "s", Actions: []string{"drop"}}}}, `"drop"`},
		{"negative limit", flightsvc.Options{Coordinator: coord, Endpoints: ok, MaxMessageBytes: -1}, "negative"},
		// 2*MaxMessageBytes must fit gRPC's int32 receive limit.
		{"message limit too large", flightsvc.Options{Coordinator: coord, Endpoints: ok, MaxMessageBytes: 1 << 62}, "above the limit"},
		{"message limit just too large", flightsvc.Options{Coordinator: coord, Endpoints: ok, MaxMessageBytes: flightsvc.MaxMessageBytesLimit + 1}, "above the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := flightsvc.New(tt.opts)
			if !errors.Is(err, writers.ErrInvalid) || !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("New: %v, want ErrInvalid mentioning %q", err, tt.contains)
			}
		})
	}
}

func openCoordinator(t *testing.T) *txn.Coordinator {
	t.Helper()
	coord, err := txn.Open(t.Context(), txn.Options{Dir: t.TempDir()}, flightsvc.EndpointWriters(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coord.Close() })
	return coord
}
