package emulator

import (
	"context"
	"io"
	"net/url"
	"strconv"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// GCS returns the fake-gcs-server of this test binary, started in process
// on first use. gocloud's gcsblob talks to it through
// STORAGE_EMULATOR_HOST.
func GCS(t testing.TB) *Store {
	t.Helper()
	return get(t, "gs", startFakeGCS)
}

func startFakeGCS() (*Store, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// The Go client reads objects through the XML API at the emulator's
	// address, which the server routes only for its public host.
	host := "127.0.0.1:" + strconv.Itoa(port)
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Host: "127.0.0.1", Port: uint16(port), Scheme: "http", PublicHost: host, Writer: io.Discard,
	})
	if err != nil {
		return nil, err
	}
	return &Store{
		Scheme:   "gs",
		Endpoint: "http://" + host,
		env:      []string{"STORAGE_EMULATOR_HOST=" + host},
		query:    url.Values{},
		create: func(_ context.Context, bucket string) error {
			srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
			return nil
		},
		stop: srv.Stop,
	}, nil
}
