package parquetio

import (
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestValueLayout pins the mirror of parquet.Value: after a parquet-go
// upgrade that changes the struct the writer would still be correct
// (through Value.Level) but slower, and this says so.
func TestValueLayout(t *testing.T) {
	if !layoutMatches {
		t.Fatal("valueLayout no longer mirrors parquet.Value: update it to the new parquet-go struct")
	}
	for _, lv := range []levels{{0, 0, 0}, {0, 1, 7}, {2, 3, 65534}} {
		for _, v := range []parquet.Value{parquet.Int64Value(-1), parquet.ByteArrayValue([]byte("ab")), parquet.BooleanValue(true), {}} {
			got := v
			lv.store(&got)
			want := v.Level(int(lv.rep), int(lv.def), int(lv.column))
			if !parquet.Equal(got, want) || got.Kind() != want.Kind() || got.RepetitionLevel() != want.RepetitionLevel() ||
				got.DefinitionLevel() != want.DefinitionLevel() || got.Column() != want.Column() {
				t.Errorf("levels %v on %v: got %v (col %d), want %v (col %d)", lv, v, got, got.Column(), want, want.Column())
			}
		}
	}
}
