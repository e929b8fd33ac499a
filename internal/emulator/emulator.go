// Package emulator starts real object-store servers for tests, once per
// test binary, on free loopback ports (and moto for quiverbench, StartS3):
//
//   - S3: moto in server mode, from the project's .venv (pinned in
//     requirements-test.txt; `make venv` builds it);
//   - GCS: fake-gcs-server, in process (a Go module);
//   - Azure Blob: Azurite, pinned by azurite/package-lock.json and
//     installed with internal/npmdir.
//
// A test asks for a store (S3, GCS, Azure), then for a bucket of its own
// (Store.Bucket) and a root URI in it (Store.URI). Credentials and
// emulator addresses reach gocloud through the environment: starting a
// store sets them in this process, and Store.Env lists them for child
// processes (`quiver serve`). A store whose tool is missing skips the test
// locally and fails it with CI=true (reftool.Missing). TestMain calls
// StopAll after the tests.
package emulator

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/internal/reftool"
)

// Store is one running emulator.
type Store struct {
	// Scheme is the URI scheme of its roots: "s3", "gs" or "azblob".
	Scheme string
	// Endpoint is the emulator's base URL (http://127.0.0.1:port), for
	// clients other than gocloud (delta-rs, LanceDB).
	Endpoint string
	env      []string   // KEY=VALUE settings gocloud reads
	query    url.Values // query parameters of every root URI
	create   func(ctx context.Context, bucket string) error
	stop     func()
}

// Env returns the environment settings (KEY=VALUE) a process needs to
// reach the store.
func (s *Store) Env() []string { return slices.Clone(s.env) }

// URI returns the root URI of prefix in bucket ("" for the bucket root).
func (s *Store) URI(bucket, prefix string) string {
	u := url.URL{Scheme: s.Scheme, Host: bucket, RawQuery: s.query.Encode()}
	if prefix != "" {
		u.Path = "/" + prefix
	}
	return u.String()
}

// buckets numbers the buckets of this process.
var buckets atomic.Int64

// Bucket creates a new empty bucket and returns its name.
func (s *Store) Bucket(t testing.TB) string {
	t.Helper()
	name, err := s.NewBucket(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// NewBucket is Bucket for programs: it creates a new empty bucket and
// returns its name.
func (s *Store) NewBucket(ctx context.Context) (string, error) {
	name := fmt.Sprintf("quiver-%d-%d", os.Getpid(), buckets.Add(1))
	if err := s.create(ctx, name); err != nil {
		return "", fmt.Errorf("%s emulator: create bucket %s: %w", s.Scheme, name, err)
	}
	return name, nil
}

// StartS3 starts a moto server of the caller's own, for programs
// (quiverbench's scale-out scenario) rather than tests: it needs the
// project's .venv, found from the working directory up, and the caller
// stops it with Stop. It does not set Env in this process.
func StartS3() (*Store, error) { return startMoto() }

// Stop stops a store started with StartS3.
func (s *Store) Stop() { s.stop() }

// Table returns the URI of the prefix "t" in a new bucket: a fresh table
// root.
func (s *Store) Table(t testing.TB) string { return s.URI(s.Bucket(t), "t") }

// running holds the started stores by scheme; a failed start is
// remembered so that every test asking for it fails (or skips) alike.
var running struct {
	sync.Mutex
	stores map[string]*Store
	errs   map[string]error
}

// errMissing marks a start error caused by a missing tool (skipped
// locally) rather than a failed start (always a failure).
type errMissing struct {
	tool string
	err  error
}

func (e *errMissing) Error() string { return e.tool + ": " + e.err.Error() }
func (e *errMissing) Unwrap() error { return e.err }

// Is makes errors.Is(err, ErrMissing) true.
func (e *errMissing) Is(target error) bool { return target == ErrMissing }

// ErrMissing matches (errors.Is) StartS3's error when moto is not
// installed, for callers that skip rather than fail then.
var ErrMissing = errors.New("emulator: the emulator is not installed")

// get returns the store of scheme, starting it on first use.
func get(t testing.TB, scheme string, start func() (*Store, error)) *Store {
	t.Helper()
	running.Lock()
	defer running.Unlock()
	if running.stores == nil {
		running.stores, running.errs = map[string]*Store{}, map[string]error{}
	}
	s, err := running.stores[scheme], running.errs[scheme]
	if s == nil && err == nil {
		if s, err = start(); err != nil {
			running.errs[scheme] = err
		} else {
			running.stores[scheme] = s
			for _, kv := range s.env {
				k, v, _ := strings.Cut(kv, "=")
				if err := os.Setenv(k, v); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	started(t, scheme+" emulator", err)
	return s
}

// started ends t when err says that the emulator what did not start:
// skipped (failed with CI=true) for a missing tool, failed otherwise.
func started(t testing.TB, what string, err error) {
	t.Helper()
	var miss *errMissing
	if errors.As(err, &miss) {
		reftool.Missing(t, miss.tool, miss.err)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// StopAll stops every store this process started. Call it from TestMain
// after m.Run.
func StopAll() {
	running.Lock()
	defer running.Unlock()
	for scheme, s := range running.stores {
		s.stop()
		delete(running.stores, scheme)
	}
}

// All returns the three stores, starting them; for tests that run once per
// store, name by name.
func All() []struct {
	Name  string
	Start func(testing.TB) *Store
} {
	return []struct {
		Name  string
		Start func(testing.TB) *Store
	}{{"s3", S3}, {"gs", GCS}, {"azblob", Azure}}
}

// RunTests is TestMain for a package whose tests use the emulators: it
// runs the tests, stops the emulators and then checks for leaked
// goroutines (goleak; gcsblob's OpenCensus worker, started at init, is
// expected), and exits.
func RunTests(m *testing.M) {
	code := m.Run()
	StopAll()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
