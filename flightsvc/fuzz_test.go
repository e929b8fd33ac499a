package flightsvc

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiver-ingest/quiver/writers"
)

// FuzzPutDescriptor: any CMD descriptor is either accepted with a valid
// target or refused with ErrInvalid; parsing never panics.
func FuzzPutDescriptor(f *testing.F) {
	for _, seed := range []string{
		`{"endpoint":"events","writer":"job-1","epoch":7}`,
		`{"endpoint":"events","writer":"job-1","epoch":-1}`,
		`{"endpoint":"events","writer":"","epoch":1}`,
		`{"endpoint":"events","writer":"w","epoch":1.5}`,
		`{"endpoint":"events","writer":"w","epoch":1,"x":1}`,
		`{"endpoint":"events"`,
		`[]`, ``, `null`, `{} {}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, cmd []byte) {
		got, err := parsePutDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
		if err != nil {
			if !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("%q: error %v is not ErrInvalid", cmd, err)
			}
			return
		}
		if !got.txn || got.endpoint == "" || got.writer == "" || got.epoch < 0 {
			t.Fatalf("%q: accepted as %+v", cmd, got)
		}
	})
}

// FuzzActionBody: the commit body, the richest one, decodes or is refused
// with ErrInvalid.
func FuzzActionBody(f *testing.F) {
	for _, seed := range []string{
		`{"writer":"w","epoch":1,"descriptors":{"events":["AAEC"]}}`,
		`{"writer":"w","epoch":1,"descriptors":{"events":"AAEC"}}`,
		`{"writer":"w","epoch":1,"ttl_s":5}`,
		`{"writer":1}`, `{`, ``, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b struct {
			Writer      *string             `json:"writer"`
			Epoch       *int64              `json:"epoch"`
			Descriptors map[string][]string `json:"descriptors"`
		}
		err := decodeStrict("action commit", body, &b)
		if err == nil {
			_, _, err = txnRef{b.Writer, b.Epoch}.check("action commit")
		}
		if err != nil && !errors.Is(err, writers.ErrInvalid) {
			t.Fatalf("%q: error %v is not ErrInvalid", body, err)
		}
	})
}
