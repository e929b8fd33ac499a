package deltalayout

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/quiver-ingest/quiver/writers"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// HiveDefaultPartition is the directory name of a null partition value.
const HiveDefaultPartition = "__HIVE_DEFAULT_PARTITION__"

// Typed values for FormatPartitionValue and ColumnStat that a plain Go type
// cannot tell apart.
type (
	// Date is a calendar date (the time of day is ignored).
	Date time.Time
	// TimestampNTZ is a wall-clock timestamp without zone: its fields are
	// used as they are, never converted.
	TimestampNTZ time.Time
	// Decimal is a decimal as plain text ("-12.340"), written to stats as a
	// JSON number.
	Decimal string
)

// FormatPartitionValue serializes a partition value for
// add.partitionValues: nil → nil (null); string as is; integers as decimal
// text; floats as Java's Double.toString and Float.toString spell them; bool "true"/"false"; Decimal as is; Date "YYYY-MM-DD";
// time.Time (timestamp) as ISO 8601 UTC with microseconds
// ("2024-01-01T10:00:00.000000Z"); TimestampNTZ "YYYY-MM-DD HH:MM:SS.ffffff".
// Other types (binary included) are refused with writers.ErrInvalid.
func FormatPartitionValue(v any) (*string, error) {
	var s string
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		s = v
	case bool:
		s = strconv.FormatBool(v)
	case int8, int16, int32, int64, int, uint8, uint16, uint32:
		s = fmt.Sprint(v)
	case float32:
		s = javaFloat(float64(v), 32)
	case float64:
		s = javaFloat(v, 64)
	case Decimal:
		s = string(v)
	case Date:
		s = time.Time(v).Format(time.DateOnly)
	case time.Time:
		s = v.UTC().Format("2006-01-02T15:04:05.000000Z")
	case TimestampNTZ:
		s = time.Time(v).Format("2006-01-02 15:04:05.000000")
	default:
		return nil, writers.Errorf(writers.ErrInvalid, "delta: partition value of type %T is not supported; partition by a string, number, boolean, date or timestamp column", v)
	}
	return &s, nil
}

// ParsePartitionValue decodes a partitionValues entry of Delta type t into
// the Go types FormatPartitionValue takes (int64 for every integer type,
// float64 for float and double, time.Time in UTC for timestamp,
// TimestampNTZ, Date, Decimal, bool, string). nil and "" (except for
// strings) are null. Both Go and Java float syntaxes parse; timestamps are
// accepted as ISO 8601 or "YYYY-MM-DD HH:MM:SS[.ffffff]" (taken as UTC).
func ParsePartitionValue(v *string, t deltalog.DataType) (any, error) {
	if v == nil || (*v == "" && t.Name != "string") {
		return nil, nil
	}
	s := *v
	var (
		out any
		err error
	)
	switch t.Name {
	case "string":
		out = s
	case "boolean":
		out, err = strconv.ParseBool(s)
	case "byte", "short", "integer", "long":
		out, err = strconv.ParseInt(s, 10, 64)
	case "float", "double":
		// Java's "Infinity" and "1.0E21" and the "+Inf" and "1e+21" of
		// tables Quiver wrote before both parse.
		out, err = strconv.ParseFloat(s, 64)
	case "decimal":
		_, err = strconv.ParseFloat(s, 64)
		out = Decimal(s)
	case "date":
		var d time.Time
		d, err = time.Parse(time.DateOnly, s)
		out = Date(d)
	case "timestamp":
		out, err = parseTimestamp(s)
	case "timestamp_ntz":
		var ts time.Time
		ts, err = parseTimestamp(s)
		out = TimestampNTZ(ts)
	case "binary":
		out = []byte(s)
	default:
		return nil, fmt.Errorf("delta: partition value of type %s: %w", t, deltalog.ErrUnsupported)
	}
	if err != nil {
		return nil, fmt.Errorf("delta: partition value %q is not a valid %s: %w", s, t, deltalog.ErrCorrupt)
	}
	return out, nil
}

// javaFloat spells v as Java's Double.toString (bitSize 64) or
// Float.toString (32) does, since Java readers parse partition values with
// Double.parseDouble, which refuses Go's "+Inf": "Infinity", "NaN", "1.5",
// "100.0", and scientific "1.0E21", "1.0E-4" outside [10^-3, 10^7). The
// digits are the shortest that read back as v; when that is one digit, Java
// takes the closest two-digit decimal if it also reads back ("4.9E-324").
func javaFloat(v float64, bitSize int) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	case v == 0 && math.Signbit(v):
		return "-0.0"
	case v == 0:
		return "0.0"
	}
	sci := strconv.FormatFloat(v, 'e', -1, bitSize) // "-1.2345e+07"
	if m, _, _ := strings.Cut(sci, "e"); len(strings.TrimPrefix(m, "-")) == 1 {
		two := strconv.FormatFloat(v, 'e', 1, bitSize)
		if back, err := strconv.ParseFloat(two, bitSize); err == nil && back == v {
			sci = two
		}
	}
	mant, expText, _ := strings.Cut(sci, "e")
	exp, _ := strconv.Atoi(expText)
	sign := ""
	if mant[0] == '-' {
		sign, mant = "-", mant[1:]
	}
	digits := strings.TrimRight(strings.Replace(mant, ".", "", 1), "0") // v != 0: never empty
	switch {
	case exp < -3 || exp >= 7:
		return fmt.Sprintf("%s%s.%sE%d", sign, digits[:1], orZero(digits[1:]), exp)
	case exp < 0:
		return sign + "0." + strings.Repeat("0", -exp-1) + digits
	}
	if len(digits) <= exp {
		digits += strings.Repeat("0", exp+1-len(digits))
	}
	return sign + digits[:exp+1] + "." + orZero(digits[exp+1:])
}

// orZero is s, or "0" when s is empty: Java always writes a digit after
// the point.
func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

var timestampLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
}

func parseTimestamp(s string) (time.Time, error) {
	var err error
	for _, layout := range timestampLayouts {
		var t time.Time
		if t, err = time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, err
}

// hiveEscape lists the bytes Spark's Hive-style escaping turns into %XX in
// partition directory names (control characters are escaped too).
const hiveEscape = "\"#%'*/:=?\\\x7f{[]^"

// PartitionDir is the Hive-style directory (storage key prefix, not
// URL-encoded) of a file with these partition values: "a=1/b=x%2Fy/" for
// columns a and b, HiveDefaultPartition for nulls and empty strings. It is
// "" for an unpartitioned table.
func PartitionDir(columns []string, values map[string]*string) string {
	var b strings.Builder
	for _, c := range columns {
		b.WriteString(escapePartition(c))
		b.WriteByte('=')
		if v := values[c]; v == nil || *v == "" {
			b.WriteString(HiveDefaultPartition)
		} else {
			b.WriteString(escapePartition(*v))
		}
		b.WriteByte('/')
	}
	return b.String()
}

func escapePartition(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || strings.IndexByte(hiveEscape, c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
