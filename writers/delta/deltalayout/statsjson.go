package deltalayout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// statsStringPrefix is how many characters of a string min/max are kept
// (Spark's default).
const statsStringPrefix = 32

// ColumnStat is the statistics of one leaf column of a data file. Path is
// the column's struct path (["a","b"] for a.b). Min and Max are nil to
// leave them out; otherwise one of int64 (or a smaller int), float64 (or
// float32), string, Decimal, Date, time.Time (timestamp) or TimestampNTZ.
// bool and []byte values are accepted and left out (the protocol keeps no
// min/max for them), as are NaN floats. NullCount < 0 leaves the count out.
type ColumnStat struct {
	Path      []string
	Min, Max  any
	NullCount int64
}

// BuildStats renders the stats JSON string of a file holding numRecords
// rows: minValues, maxValues and nullCount nested by struct path.
// Timestamps are truncated to milliseconds as the protocol says (readers
// pruning with a max allow for the dropped microseconds);
// strings are cut to 32 characters (a cut max has its last character
// incremented so it stays ≥ every value, or is left out when that is
// impossible). A stat that cannot be written is left out rather than
// guessed; the error reports a value of an unsupported Go type
// (writers.ErrInvalid).
func BuildStats(numRecords int64, cols []ColumnStat) (string, error) {
	mins, maxs, nulls := statsObject{}, statsObject{}, statsObject{}
	for _, c := range cols {
		if len(c.Path) == 0 {
			return "", fmt.Errorf("delta: stats: column without a path: %w", deltalog.ErrCorrupt)
		}
		if v, ok, err := statValue(c.Min, false); err != nil {
			return "", fmt.Errorf("delta: stats for %v: %w", c.Path, err)
		} else if ok {
			mins.set(c.Path, v)
		}
		if v, ok, err := statValue(c.Max, true); err != nil {
			return "", fmt.Errorf("delta: stats for %v: %w", c.Path, err)
		} else if ok {
			maxs.set(c.Path, v)
		}
		if c.NullCount >= 0 {
			nulls.set(c.Path, c.NullCount)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		NumRecords int64       `json:"numRecords"`
		MinValues  statsObject `json:"minValues"`
		MaxValues  statsObject `json:"maxValues"`
		NullCount  statsObject `json:"nullCount"`
	}{numRecords, mins, maxs, nulls})
	if err != nil {
		return "", fmt.Errorf("delta: stats: %w", err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}

// statsObject is a nested JSON object of stats values.
type statsObject map[string]any

func (o statsObject) set(path []string, v any) {
	for _, p := range path[:len(path)-1] {
		child, ok := o[p].(statsObject)
		if !ok {
			child = statsObject{}
			o[p] = child
		}
		o = child
	}
	o[path[len(path)-1]] = v
}

// statValue converts a min (isMax false) or max to its JSON value; ok is
// false when the value is to be left out.
func statValue(v any, isMax bool) (out any, ok bool, err error) {
	switch v := v.(type) {
	case nil, bool, []byte:
		return nil, false, nil
	case int8, int16, int32, int64, int, uint8, uint16, uint32:
		return v, true, nil
	case float32:
		f := float64(v)
		return v, !math.IsNaN(f) && !math.IsInf(f, 0), nil
	case float64:
		return v, !math.IsNaN(v) && !math.IsInf(v, 0), nil
	case Decimal:
		if _, err := strconv.ParseFloat(string(v), 64); err != nil {
			return nil, false, fmt.Errorf("decimal %q is not a number: %w", string(v), deltalog.ErrCorrupt)
		}
		return json.RawMessage(v), true, nil
	case string:
		s, ok := truncateStat(v, isMax)
		return s, ok, nil
	case Date:
		return time.Time(v).Format(time.DateOnly), true, nil
	case time.Time:
		return v.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z"), true, nil
	case TimestampNTZ:
		return time.Time(v).Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000"), true, nil
	}
	return nil, false, fmt.Errorf("stats value of type %T is not supported: %w", v, deltalog.ErrCorrupt)
}

// truncateStat cuts s to statsStringPrefix characters. A cut max gets its
// last character incremented (so it is greater than every string with the
// kept prefix); when no character can be incremented the max is left out.
func truncateStat(s string, isMax bool) (string, bool) {
	if utf8.RuneCountInString(s) <= statsStringPrefix {
		return s, true
	}
	runes := []rune(s)[:statsStringPrefix]
	if !isMax {
		return string(runes), true
	}
	for i := len(runes) - 1; i >= 0; i-- {
		next := runes[i] + 1
		if next == 0xD800 { // skip the surrogate range
			next = 0xE000
		}
		if next <= utf8.MaxRune {
			return string(append(runes[:i], next)), true
		}
	}
	return "", false
}
