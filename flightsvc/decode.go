package flightsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// decodeStrict decodes the JSON object data into v, a pointer to a struct:
// unknown fields, trailing data and type mismatches are ErrInvalid errors
// prefixed with what and naming the field. An empty body decodes as {}.
func decodeStrict(what string, data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return writers.Errorf(writers.ErrInvalid, "%s: %s", what, describeJSONError(err, v))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return writers.Errorf(writers.ErrInvalid, "%s: unexpected data after the JSON object", what)
	}
	return nil
}

func describeJSONError(err error, v any) string {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return "not valid JSON at byte " + strconv.FormatInt(syntax.Offset, 10) + ": " + syntax.Error()
	case errors.As(err, &typ) && typ.Field != "":
		return "field \"" + typ.Field + "\" must be " + jsonKind(typ.Type) + ", got JSON " + typ.Value
	case errors.As(err, &typ):
		return "must be a JSON object, got JSON " + typ.Value
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ") + " (expected: " + strings.Join(jsonFields(reflect.TypeOf(v)), ", ") + ")"
	}
	return err.Error()
}

// jsonKind names a Go type the way a JSON user thinks of it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "an array"
	}
	return t.String()
}

// jsonFields lists the JSON field names of struct type t.
func jsonFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// txnRef is the {"writer","epoch"} part of descriptors and action bodies.
// Pointers tell a missing field from a zero one. Bodies with more fields
// repeat these two rather than embed txnRef, so that decoding errors name
// "epoch", not "txnRef.epoch".
type txnRef struct {
	Writer  *string `json:"writer"`
	Epoch   *int64  `json:"epoch"`
	Attempt *string `json:"attempt"`
}

// maxAttemptBytes bounds an attempt id in a body or descriptor (the
// server's own are 16 hex digits).
const maxAttemptBytes = 64

// withAttempt returns ctx naming r's attempt (txn.WithAttempt), or ctx
// when r names none; an empty or overlong attempt is ErrInvalid.
func (r txnRef) withAttempt(ctx context.Context, what string) (context.Context, error) {
	switch {
	case r.Attempt == nil:
		return ctx, nil
	case *r.Attempt == "" || len(*r.Attempt) > maxAttemptBytes:
		return ctx, writers.Errorf(writers.ErrInvalid, `%s: field "attempt" must be an attempt id as begin answered it (1 to %d bytes), got %d bytes`, what, maxAttemptBytes, len(*r.Attempt))
	}
	return txn.WithAttempt(ctx, *r.Attempt), nil
}

// check returns the writer and epoch, or an ErrInvalid error prefixed with
// what naming the missing or bad field.
func (r txnRef) check(what string) (string, int64, error) {
	switch {
	case r.Writer == nil:
		return "", 0, writers.Errorf(writers.ErrInvalid, `%s: missing field "writer"`, what)
	case *r.Writer == "":
		return "", 0, writers.Errorf(writers.ErrInvalid, `%s: field "writer" must not be empty`, what)
	case len(*r.Writer) > txn.MaxWriterBytes:
		return "", 0, checkWriter(what, *r.Writer)
	case r.Epoch == nil:
		return "", 0, writers.Errorf(writers.ErrInvalid, `%s: missing field "epoch"`, what)
	case *r.Epoch < 0:
		return "", 0, writers.Errorf(writers.ErrInvalid, `%s: field "epoch" must be >= 0, got %d`, what, *r.Epoch)
	}
	return *r.Writer, *r.Epoch, nil
}

// checkWriter refuses a writer name longer than txn.MaxWriterBytes,
// without quoting it (it may be megabytes).
func checkWriter(what, writer string) error {
	if len(writer) > txn.MaxWriterBytes {
		return writers.Errorf(writers.ErrInvalid, `%s: field "writer" is %d bytes long, the maximum is %d`, what, len(writer), txn.MaxWriterBytes)
	}
	return nil
}

// requireString returns *v, or an ErrInvalid error naming field when it is
// missing or empty.
func requireString(what, field string, v *string) (string, error) {
	if v == nil {
		return "", writers.Errorf(writers.ErrInvalid, `%s: missing field %q`, what, field)
	}
	if *v == "" {
		return "", writers.Errorf(writers.ErrInvalid, `%s: field %q must not be empty`, what, field)
	}
	return *v, nil
}
