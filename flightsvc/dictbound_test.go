package flightsvc

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/flightsvc/ipccheck"
	"github.com/quiver-ingest/quiver/writers"
)

// Compressed dictionaries count at their decompressed size: arrow-go keeps
// them decompressed, and a few bytes of ZSTD can stand for a whole message
// of dictionary values, so counting the bytes received let a stream of
// compressed deltas (no record batch needed) grow the reader's dictionary
// memo without bound.
func TestGuardBoundsCompressedDictionaries(t *testing.T) {
	// 9000 bytes of values per delta, a few dozen compressed.
	c := dictionaryDeltas(t, 9000, ipc.WithZstd())
	// Only the schema and the dictionaries: the memo grows with no batch
	// for the endpoint budget to weigh.
	var msgs []*flight.FlightData
	var body int
	for i, m := range c.out {
		if i == 0 {
			msgs = append(msgs, m)
			continue
		}
		if pm, err := ipccheck.ParseMessage(m.DataHeader); err == nil && pm.IsDictionary() {
			msgs = append(msgs, m)
			body += len(m.DataBody)
		}
	}
	if body >= 10_000 {
		t.Fatalf("the compressed dictionaries take %d bytes: the test needs them under the limit", body)
	}
	got, err := readGuarded(msgs, memory.DefaultAllocator, 10_000)
	for _, r := range got {
		r.Release()
	}
	if !errors.Is(err, writers.ErrExhausted) || !strings.Contains(err.Error(), "dictionaries hold") {
		t.Fatalf("error %v, want the dictionaries (%d bytes compressed, ~180 kB decompressed) refused (ResourceExhausted)", err, body)
	}
}
