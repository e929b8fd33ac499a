package bench

import (
	"slices"
	"testing"
)

func TestParseStreams(t *testing.T) {
	tests := []struct {
		name, list string
		want       []int
		wantErr    bool
	}{
		{"one", "1", []int{1}, false},
		{"list in order with spaces", "4, 1 ,16", []int{4, 1, 16}, false},
		{"zero", "1,0", nil, true},
		{"negative", "-2", nil, true},
		{"not a number", "1,x", nil, true},
		{"empty item", "1,,2", nil, true},
		{"empty", "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStreams(tt.list)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseStreams(%q) error %v, want error %v", tt.list, err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseStreams(%q) = %v, want %v", tt.list, got, tt.want)
			}
		})
	}
}
