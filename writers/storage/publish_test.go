package storage

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
)

// faultyStore answers PutIfAbsent and Get with injected results.
type faultyStore struct {
	putErr  error
	got     []byte
	getErr  error
	getCall bool
	local   bool
}

func (s *faultyStore) Local() bool { return s.local }

func (s *faultyStore) PutIfAbsent(context.Context, string, []byte) error { return s.putErr }

func (s *faultyStore) Get(context.Context, string) ([]byte, error) {
	s.getCall = true
	return s.got, s.getErr
}

// httpError is a driver's error carrying an HTTP status, as the AWS SDK's.
type httpError int

func (e httpError) Error() string       { return fmt.Sprintf("HTTP %d", int(e)) }
func (e httpError) HTTPStatusCode() int { return int(e) }

// Every sink classes a failed publish the same way: the same storage
// fault used to be Unavailable in Delta and "outcome unknown" in Lance.
func TestPublishClassesOutcomes(t *testing.T) {
	data := []byte("commit")
	unreachable := &Error{Op: "put-if-absent", Class: writers.ErrUnavailable, Err: errors.New("connection reset")}
	denied := &Error{Op: "put-if-absent", Class: writers.ErrPermissionDenied, Err: errors.New("403")}
	tests := []struct {
		name    string
		store   faultyStore
		want    error // nil: success
		not     error
		readsTo bool
	}{
		{"put succeeds", faultyStore{}, nil, nil, false},
		{"lost race", faultyStore{putErr: ErrAlreadyExists, got: []byte("other")}, ErrAlreadyExists, writers.ErrOutcomeUnknown, true},
		// An SDK's retry of a put that landed, its answer lost.
		{"own put found", faultyStore{putErr: ErrAlreadyExists, got: data}, nil, nil, true},
		{"exists, unreadable", faultyStore{putErr: ErrAlreadyExists, getErr: unreachable}, writers.ErrOutcomeUnknown, nil, true},
		{"refused", faultyStore{putErr: denied}, writers.ErrPermissionDenied, writers.ErrOutcomeUnknown, false},
		{"answer lost, landed", faultyStore{putErr: unreachable, got: data}, nil, nil, true},
		{"answer lost, another's", faultyStore{putErr: unreachable, got: []byte("other")}, ErrAlreadyExists, writers.ErrOutcomeUnknown, true},
		{"nothing landed in a folder", faultyStore{putErr: unreachable, getErr: &Error{Class: ErrNotExist}, local: true}, writers.ErrUnavailable, writers.ErrOutcomeUnknown, true},
		// An object store may still be writing a put whose answer was lost.
		{"absent from a store", faultyStore{putErr: unreachable, getErr: &Error{Class: ErrNotExist}}, writers.ErrOutcomeUnknown, nil, true},
		// Linked, its folder not synced: visible, but a crash may lose it.
		{"landed, not durable", faultyStore{putErr: writers.Errorf(writers.ErrOutcomeUnknown, "folder not synced"), got: data}, writers.ErrOutcomeUnknown, nil, false},
		// A 503 after the SDK's retries says nothing of an earlier attempt
		// whose answer was lost: read back, and absent from a store is
		// still unknown.
		{"throttled", faultyStore{putErr: &Error{Class: writers.ErrUnavailable, Err: httpError(503)}, getErr: &Error{Class: ErrNotExist}}, writers.ErrOutcomeUnknown, nil, true},
		{"cannot tell", faultyStore{putErr: unreachable, getErr: unreachable}, writers.ErrOutcomeUnknown, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Publish(context.Background(), &tt.store, "_delta_log/1.json", data)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("Publish: %v, want success", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("Publish: %v, want %v", err, tt.want)
			case tt.not != nil && errors.Is(err, tt.not):
				t.Fatalf("Publish: %v must not be %v", err, tt.not)
			}
			if tt.store.getCall != tt.readsTo {
				t.Fatalf("read back the key: %v, want %v", tt.store.getCall, tt.readsTo)
			}
		})
	}
}
