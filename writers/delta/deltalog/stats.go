package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Stats is parsed per-file statistics. Values inside MinValues/MaxValues
// are nested maps (map[string]any) for structs and json.Number, string or
// bool leaves (decimals stay exact as json.Number).
type Stats struct {
	NumRecords  int64          `json:"numRecords"`
	MinValues   map[string]any `json:"minValues"`
	MaxValues   map[string]any `json:"maxValues"`
	NullCount   map[string]any `json:"nullCount"`
	TightBounds *bool          `json:"tightBounds,omitempty"`
}

// ParseStats decodes an add.stats string; "" gives NumRecords -1 and no
// values (unknown). Errors wrap ErrCorrupt.
func ParseStats(s string) (*Stats, error) {
	if s == "" {
		return &Stats{NumRecords: -1}, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var st Stats
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("delta: stats: %w: %w", ErrCorrupt, err)
	}
	return &st, nil
}

// Min returns the min value of the column at path (json.Number, string, …).
func (s *Stats) Min(path ...string) (any, bool) { return lookup(s.MinValues, path) }

// Max returns the max value of the column at path. Timestamp maxima were
// truncated to milliseconds by the writer: add 1 ms before pruning with it.
func (s *Stats) Max(path ...string) (any, bool) { return lookup(s.MaxValues, path) }

// Nulls returns the null count of the column at path.
func (s *Stats) Nulls(path ...string) (int64, bool) {
	v, ok := lookup(s.NullCount, path)
	if !ok {
		return 0, false
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func lookup(m map[string]any, path []string) (any, bool) {
	if len(path) == 0 {
		return nil, false
	}
	var cur any = m
	for _, p := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}
