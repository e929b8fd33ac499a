package flightsvc_test

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

// Bad input is answered with the right code and a message naming the
// problem, and the server keeps serving.
func TestBadInput(t *testing.T) {
	fixed := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
	s := startServer(t, serverConfig{
		endpoints: map[string]writers.Writer{
			"events": discard.New(nil),
			"fixed":  discard.New(fixed),
		},
		maxMessageBytes: 64 << 10,
	})
	put := func(desc *flight.FlightDescriptor, rows ...int) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := s.put(ctx, desc, rows...)
			return err
		}
	}
	action := func(typ, body string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := s.action(ctx, typ, body)
			return err
		}
	}
	long := strings.Repeat("w", 257)
	tests := []struct {
		name      string
		call      func(context.Context) error
		code      codes.Code
		fragments []string
	}{
		{"unknown endpoint", put(pathDesc("nope"), 1), codes.NotFound, []string{`unknown endpoint "nope"`, "events"}},
		{"path with two elements", put(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "b"}}, 1), codes.InvalidArgument, []string{"one element"}},
		{"malformed cmd json", put(cmdDesc(`{"endpoint":"events",`), 1), codes.InvalidArgument, []string{"CMD descriptor", "JSON"}},
		{"cmd unknown field", put(cmdDesc(`{"endpoint":"events","writer":"w","epoch":1,"epohc":2}`), 1), codes.InvalidArgument, []string{`unknown field "epohc"`, "endpoint, writer, epoch"}},
		{"cmd missing writer", put(cmdDesc(`{"endpoint":"events","epoch":1}`), 1), codes.InvalidArgument, []string{`missing field "writer"`}},
		{"cmd missing epoch", put(cmdDesc(`{"endpoint":"events","writer":"w"}`), 1), codes.InvalidArgument, []string{`missing field "epoch"`}},
		{"cmd missing endpoint", put(cmdDesc(`{"writer":"w","epoch":1}`), 1), codes.InvalidArgument, []string{`missing field "endpoint"`}},
		{"cmd negative epoch", put(cmdDesc(`{"endpoint":"events","writer":"w","epoch":-1}`), 1), codes.InvalidArgument, []string{`"epoch" must be >= 0`}},
		{"cmd epoch not an integer", put(cmdDesc(`{"endpoint":"events","writer":"w","epoch":"7"}`), 1), codes.InvalidArgument, []string{`field "epoch" must be an integer`}},
		{"cmd unknown endpoint", put(txnDesc("nope", "w", 1), 1), codes.NotFound, []string{`"nope"`}},
		{"schema mismatch with the endpoint", put(pathDesc("fixed"), 1), codes.InvalidArgument, []string{`"name"`, "large_utf8"}},
		{"message over the size limit", put(pathDesc("events"), 20_000), codes.ResourceExhausted, []string{"limits.max_message_bytes", "65536"}},
		{"message over the gRPC cap", put(pathDesc("events"), 200_000), codes.ResourceExhausted, []string{"larger than max"}},
		{"unknown action", action("comit", `{}`), codes.InvalidArgument, []string{`unknown action "comit"`, "commit"}},
		{"malformed action body", action("precommit", `{"writer":`), codes.InvalidArgument, []string{"action precommit", "JSON"}},
		{"action body unknown field", action("commit", `{"writer":"w","epoch":1,"descriptor":{}}`), codes.InvalidArgument, []string{`unknown field "descriptor"`, "descriptors"}},
		{"action body missing epoch", action("rollback", `{"writer":"w"}`), codes.InvalidArgument, []string{`missing field "epoch"`}},
		{"rollback give_up not a boolean", action("rollback", `{"writer":"w","epoch":1,"give_up":"yes"}`), codes.InvalidArgument, []string{`field "give_up" must be`}},
		{"rollback unknown field", action("rollback", `{"writer":"w","epoch":1,"giveup":true}`), codes.InvalidArgument, []string{`unknown field "giveup"`, "give_up"}},
		{"action body wrong type", action("status", `{"writer":1,"epoch":1}`), codes.InvalidArgument, []string{`field "writer" must be a string`}},
		{"action body not an object", action("status", `[1]`), codes.InvalidArgument, []string{"JSON object"}},
		{"action body trailing data", action("status", `{"writer":"w","epoch":1} {}`), codes.InvalidArgument, []string{"after the JSON object"}},
		{"commit descriptor not base64", action("commit", `{"writer":"w","epoch":1,"descriptors":{"events":["%%%"]}}`), codes.InvalidArgument, []string{`descriptors["events"][0]`, "base64"}},
		{"commit descriptor for unknown endpoint", action("commit", `{"writer":"w","epoch":1,"descriptors":{"nope":[""]}}`), codes.NotFound, []string{`"nope"`}},
		{"begin negative ttl", action("begin", `{"writer":"w","epoch":1,"ttl_s":-5}`), codes.InvalidArgument, []string{`"ttl_s"`}},
		// 18446744074 s times 1e9 wraps int64 to 0.29 s.
		{"begin ttl overflowing a duration", action("begin", `{"writer":"w","epoch":1,"ttl_s":18446744074}`), codes.InvalidArgument, []string{`"ttl_s"`, "604800"}},
		{"begin ttl above a week", action("begin", `{"writer":"w","epoch":1,"ttl_s":604801}`), codes.InvalidArgument, []string{`"ttl_s"`, "604800"}},
		{"begin writer too long", action("begin", `{"writer":"`+long+`","epoch":1}`), codes.InvalidArgument, []string{`"writer" is 257 bytes long`, "256"}},
		{"status writer too long", action("status", `{"writer":"`+long+`","epoch":1}`), codes.InvalidArgument, []string{`"writer" is 257 bytes long`}},
		{"committed-epoch writer too long", action("committed-epoch", `{"endpoint":"events","writer":"`+long+`"}`), codes.InvalidArgument, []string{`"writer" is 257 bytes long`}},
		{"cmd writer too long", put(txnDesc("events", long, 1), 1), codes.InvalidArgument, []string{"CMD descriptor", `"writer" is 257 bytes long`}},
		{"committed-epoch unknown endpoint", action("committed-epoch", `{"endpoint":"nope","writer":"w"}`), codes.NotFound, []string{`"nope"`}},
		{"status of an unknown transaction", action("status", `{"writer":"ghost","epoch":1}`), codes.NotFound, nil},
		{"get schema of an unknown endpoint", func(ctx context.Context) error {
			_, err := s.client.GetSchema(ctx, pathDesc("nope"))
			return err
		}, codes.NotFound, []string{`"nope"`}},
		{"get flight info with a cmd descriptor", func(ctx context.Context) error {
			_, err := s.client.GetFlightInfo(ctx, cmdDesc(`{}`))
			return err
		}, codes.InvalidArgument, []string{"PATH"}},
		{"doget", func(ctx context.Context) error {
			stream, err := s.client.DoGet(ctx, &flight.Ticket{})
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}, codes.Unimplemented, []string{"only ingests"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, tt.call(t.Context()), tt.code, tt.fragments...)
			// The server keeps serving.
			if _, err := s.put(t.Context(), pathDesc("events"), 2); err != nil {
				t.Fatalf("the server stopped serving: %v", err)
			}
		})
	}
	if s.sinks["fixed"].Committed().Rows != 0 {
		t.Fatal("a rejected stream published rows")
	}
	if n := s.sinks["events"].OpenKeys(); n != 0 {
		t.Fatalf("%d keys left staged by rejected streams", n)
	}
}
