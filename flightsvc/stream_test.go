package flightsvc

import (
	"errors"
	"testing"

	"github.com/quiver-ingest/quiver/flightsvc/groupcommit"
	"github.com/quiver-ingest/quiver/writers"
)

// TestBatchSeq: a batch's seq is {"seq":N}, N an integer >= 0; empty
// metadata or an object without seq is none; anything else is refused.
func TestBatchSeq(t *testing.T) {
	for _, tt := range []struct {
		meta string
		want int64
		bad  bool
	}{
		{``, groupcommit.NoSeq, false},
		{`  `, groupcommit.NoSeq, false},
		{`{"seq":7}`, 7, false},
		{`{"seq":0,"trace":"x"}`, 0, false},
		{`{"other":1}`, groupcommit.NoSeq, false},
		{`{"seq":null}`, 0, true},
		{`null`, 0, true},
		{`{"seq":-1}`, 0, true},
		{`{"seq":1.5}`, 0, true},
		{`{"seq":"3"}`, 0, true},
		{`{"seq":99999999999999999999}`, 0, true},
		{`{"seq":1} junk`, 0, true},
		{`[1]`, 0, true},
	} {
		got, err := batchSeq([]byte(tt.meta))
		if tt.bad != errors.Is(err, writers.ErrInvalid) || !tt.bad && got != tt.want {
			t.Errorf("batchSeq(%q) = %d, %v; want %d (refused: %v)", tt.meta, got, err, tt.want, tt.bad)
		}
	}
}
