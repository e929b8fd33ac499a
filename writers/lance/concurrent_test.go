package lance

import (
	"errors"
	"testing"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
)

// TestConcurrentRecords: a commit conflicts with a concurrent version
// that records its epoch (or a later one) for its writer, or a seq of its
// stream writers at or above the first one it publishes; other writers
// and earlier seqs do not conflict.
func TestConcurrentRecords(t *testing.T) {
	seqs := []writers.WriterSeq{{Writer: "c1", First: 5, Last: 9}}
	version := func(props map[string]string) *lancetable.Transaction {
		return &lancetable.Transaction{Properties: props}
	}
	for _, tt := range []struct {
		name     string
		key      writers.TxnKey
		seqs     []writers.WriterSeq
		other    map[string]string
		conflict bool
	}{
		{"same epoch", writers.TxnKey{Writer: "job", Epoch: 3}, nil, map[string]string{propWriter: "job", propEpoch: "3"}, true},
		{"older epoch", writers.TxnKey{Writer: "job", Epoch: 3}, nil, map[string]string{propWriter: "job", propEpoch: "2"}, false},
		{"other writer", writers.TxnKey{Writer: "job", Epoch: 3}, nil, map[string]string{propWriter: "other", propEpoch: "7"}, false},
		{"seqs overlap", writers.AutoKey("g"), seqs, map[string]string{propSeqs: `{"c1":5,"c2":1}`}, true},
		{"seqs before", writers.AutoKey("g"), seqs, map[string]string{propSeqs: `{"c1":4}`}, false},
		{"auto without seqs", writers.AutoKey("g"), nil, map[string]string{propSeqs: `{"c1":5}`}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rule := concurrentRecords(tt.key, tt.seqs)
			var err error
			if rule != nil {
				err = rule(version(tt.other))
			}
			if got := errors.Is(err, writers.ErrConflict); got != tt.conflict {
				t.Fatalf("conflict = %v (%v), want %v", got, err, tt.conflict)
			}
		})
	}
}
