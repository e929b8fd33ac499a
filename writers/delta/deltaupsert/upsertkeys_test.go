package deltaupsert

import (
	"math"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// A file's partition values spelled by another writer (Spark's timestamps,
// older Quiver's Go floats) read as the source's spelling: compared as
// spelled, an upsert missed the key and inserted it a second time.
func TestCanonicalPartition(t *testing.T) {
	ts := deltalog.DataType{Name: "timestamp"}
	want, err := deltalayout.FormatPartitionValue(time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	inf, _ := deltalayout.FormatPartitionValue(math.Inf(1))
	tenth, _ := deltalayout.FormatPartitionValue(float32(0.1))
	tests := []struct {
		v    string
		typ  deltalog.DataType
		want string
	}{
		{"2024-01-01 10:00:00", ts, *want},
		{"2024-01-01T10:00:00.000000Z", ts, *want},
		{"+Inf", deltalog.DataType{Name: "double"}, *inf},
		{"Infinity", deltalog.DataType{Name: "double"}, *inf},
		{"0.1", deltalog.DataType{Name: "float"}, *tenth},
		{"007", deltalog.DataType{Name: "integer"}, "7"},
		{"not a number", deltalog.DataType{Name: "integer"}, "not a number"},
		{"a b", deltalog.DataType{Name: "string"}, "a b"},
	}
	for _, tt := range tests {
		got := canonicalPartition(&tt.v, tt.typ)
		if got == nil || *got != tt.want {
			t.Errorf("canonicalPartition(%q, %s) = %v, want %q", tt.v, tt.typ.Name, got, tt.want)
		}
	}
	if got := canonicalPartition(new(string), ts); got != nil {
		t.Errorf(`"" reads as %q, want null`, *got)
	}
}
