package bench

import (
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"one", []float64{7}, 7},
		{"odd count", []float64{3, 1, 2}, 2},
		{"even count is the upper middle", []float64{4, 1, 3, 2}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.xs)
			if got := Median(tt.xs); got != tt.want {
				t.Errorf("Median(%v) = %v, want %v", in, got, tt.want)
			}
			if !slices.Equal(tt.xs, in) {
				t.Errorf("Median modified its input: %v, was %v", tt.xs, in)
			}
		})
	}
}

func TestMedianByReturnsTheElement(t *testing.T) {
	runs := []Result{{Target: "a", RowsPerSec: 30}, {Target: "b", RowsPerSec: 10}, {Target: "c", RowsPerSec: 20}}
	if got := MedianBy(runs, func(r Result) float64 { return r.RowsPerSec }); got.Target != "c" {
		t.Errorf("median run %q, want c", got.Target)
	}
}
