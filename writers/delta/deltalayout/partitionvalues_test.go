package deltalayout

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiver-ingest/quiver/internal/deltagolden"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

func TestPartitionValuesAndPaths(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		value   any
		text    *string
		typ     string
		dir     string
		addPath string
	}{
		{"A/A", str("A/A"), "string", "x=A%2FA/", "x=A%252FA/"},
		{"bar+%21", str("bar+%21"), "string", "x=bar+%2521/", "x=bar+%252521/"},
		{nil, nil, "string", "x=__HIVE_DEFAULT_PARTITION__/", "x=__HIVE_DEFAULT_PARTITION__/"},
		{int64(-5), str("-5"), "long", "x=-5/", "x=-5/"},
		{true, str("true"), "boolean", "x=true/", "x=true/"},
		{Date(time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)), str("2024-01-02"), "date", "x=2024-01-02/", "x=2024-01-02/"},
		{time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC), str("2024-01-01T10:00:00.000000Z"), "timestamp",
			"x=2024-01-01T10%3A00%3A00.000000Z/", "x=2024-01-01T10%253A00%253A00.000000Z/"},
		{TimestampNTZ(time.Date(2013, 7, 5, 17, 1, 0, 123456000, time.UTC)), str("2013-07-05 17:01:00.123456"), "timestamp_ntz",
			"x=2013-07-05 17%3A01%3A00.123456/", "x=2013-07-05%2017%253A01%253A00.123456/"},
	}
	for _, c := range cases {
		text, err := FormatPartitionValue(c.value)
		if err != nil {
			t.Fatal(err)
		}
		if (text == nil) != (c.text == nil) || (text != nil && *text != *c.text) {
			t.Errorf("%v: text %v, want %v", c.value, text, c.text)
			continue
		}
		dir := PartitionDir([]string{"x"}, map[string]*string{"x": text})
		if dir != c.dir || deltalog.EncodePath(dir) != c.addPath {
			t.Errorf("%v: dir %q path %q, want %q %q", c.value, dir, deltalog.EncodePath(dir), c.dir, c.addPath)
		}
		if key, err := deltalog.DecodePath(deltalog.EncodePath(dir + "f.parquet")); err != nil || key != dir+"f.parquet" {
			t.Errorf("%v: decode = %q, %v", c.value, key, err)
		}
		back, err := ParsePartitionValue(text, deltalog.DataType{Name: c.typ})
		if err != nil {
			t.Fatal(err)
		}
		if bt, ok := back.(time.Time); ok {
			if !bt.Equal(c.value.(time.Time)) {
				t.Errorf("%v: parsed back %v", c.value, back)
			}
		} else if back != c.value {
			t.Errorf("%v: parsed back %#v", c.value, back)
		}
	}
	if v, err := ParsePartitionValue(str("1.0E10"), deltalog.DataType{Name: "double"}); err != nil || v != 1e10 {
		t.Errorf("Java float syntax: %v, %v", v, err)
	}
	if _, err := deltalog.DecodePath("s3://bucket/x.parquet"); !errors.Is(err, deltalog.ErrUnsupported) {
		t.Errorf("absolute path: %v", err)
	}
}

// Float partition values are spelled as Java's Double.toString and
// Float.toString spell them, since Java readers parse them with
// Double.parseDouble (which refuses Go's "+Inf"); both spellings read back.
func TestFloatPartitionValues(t *testing.T) {
	cases := []struct {
		value any
		java  string
		goOld string // what Quiver wrote before, still read
	}{
		{math.Inf(1), "Infinity", "+Inf"},
		{math.Inf(-1), "-Infinity", "-Inf"},
		{math.NaN(), "NaN", "NaN"},
		{1e21, "1.0E21", "1e+21"},
		{1.5, "1.5", "1.5"},
		{0.001, "0.001", "0.001"},
		{1e-4, "1.0E-4", "0.0001"},
		{9.5e-4, "9.5E-4", "0.00095"},
		{100.0, "100.0", "100"},
		{9999999.0, "9999999.0", "9.999999e+06"},
		{1e7, "1.0E7", "1e+07"},
		{-12345678.9, "-1.23456789E7", "-1.23456789e+07"},
		{0.0, "0.0", "0"},
		{math.Copysign(0, -1), "-0.0", "-0"},
		{math.MaxFloat64, "1.7976931348623157E308", "1.7976931348623157e+308"},
		{5e-324, "4.9E-324", "5e-324"},
		{float32(1.1), "1.1", "1.1"},
		{float32(1e10), "1.0E10", "1e+10"},
		{float32(3.4028235e38), "3.4028235E38", "3.4028235e+38"},
		{float32(math.Inf(-1)), "-Infinity", "-Inf"},
		{float32(0.25), "0.25", "0.25"},
		{float32(1.4e-45), "1.4E-45", "1e-45"},
		{float32(0.001), "0.001", "0.001"},
		{float32(123456.79), "123456.79", "123456.79"},
	}
	for _, c := range cases {
		typ := deltalog.DataType{Name: "double"}
		want := c.value
		if f, ok := c.value.(float32); ok {
			typ, want = deltalog.DataType{Name: "float"}, float64(f)
		}
		text, err := FormatPartitionValue(c.value)
		if err != nil || *text != c.java {
			t.Errorf("%v (%T): %v %v, want %s", c.value, c.value, strOf(text), err, c.java)
		}
		for _, s := range []string{c.java, c.goOld} {
			back, err := ParsePartitionValue(&s, typ)
			if err != nil {
				t.Errorf("%s: %v", s, err)
				continue
			}
			f := back.(float64)
			if typ.Name == "float" {
				f = float64(float32(f))
			}
			if w := want.(float64); f != w && !(math.IsNaN(f) && math.IsNaN(w)) || math.Signbit(f) != math.Signbit(w) {
				t.Errorf("%s parsed as %v, want %v", s, f, w)
			}
		}
	}
}

func strOf(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestGoldenPartitionValues: the partition values and paths of the
// reference tables (deltagolden) read back, and ours name the same
// directories.
func TestGoldenPartitionValues(t *testing.T) {
	ctx := t.Context()
	load := func(t *testing.T, name string, version int64) *deltalog.Snapshot {
		t.Helper()
		s, err := deltalog.LoadVersion(ctx, deltagolden.Open(t, name), version)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("null partition", func(t *testing.T) {
		s := load(t, "partition-null", -1)
		got := map[string]string{}
		for _, a := range s.Files() {
			v := a.PartitionValues["k"]
			k := "<null>"
			if v != nil {
				k = *v
			}
			got[k] = a.Path
			key, err := deltalog.DecodePath(a.Path)
			if err != nil {
				t.Fatal(err)
			}
			if want := PartitionDir([]string{"k"}, a.PartitionValues); !strings.HasPrefix(key, want) {
				t.Errorf("key %q does not start with %q", key, want)
			}
		}
		if len(got) != 2 || !strings.HasPrefix(got["A"], "k=A/part-") || !strings.HasPrefix(got["<null>"], "k=__HIVE_DEFAULT_PARTITION__/part-") {
			t.Fatalf("files by partition %v", got)
		}
	})
	t.Run("escaped partition paths round trip", func(t *testing.T) {
		for _, name := range []string{"partition-escaped", "special-chars-path", "deltars-partitioned-checkpoint"} {
			s := load(t, name, -1)
			adds := append([]*deltalog.Add(nil), s.Files()...)
			for _, r := range s.Tombstones() {
				adds = append(adds, &deltalog.Add{Path: r.Path, PartitionValues: r.PartitionValues})
			}
			for _, a := range adds {
				key, err := deltalog.DecodePath(a.Path)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(deltagolden.Dir(), name, key)); err != nil {
					t.Errorf("%s: decoded key %q: %v", name, key, err)
				}
				col := s.Metadata.PartitionColumns[0]
				if v := a.PartitionValues[col]; v == nil || strings.Contains(*v, " ") {
					continue // Spark escapes spaces too; our escape set is conservative
				}
				dir := PartitionDir([]string{col}, a.PartitionValues)
				if !strings.HasPrefix(key, dir) {
					t.Errorf("%s: key %q, our dir %q", name, key, dir)
				}
				// Spark leaves non-ASCII characters raw in add.path (we
				// percent-encode them; both decode to the same key).
				if isASCII(key) && !strings.HasPrefix(a.Path, deltalog.EncodePath(dir)) {
					t.Errorf("%s: path %q, our dir %q", name, a.Path, deltalog.EncodePath(dir))
				}
			}
		}
	})
	t.Run("timestamp partitions", func(t *testing.T) {
		for _, tc := range []struct {
			table, column string
			micros        []int64
		}{
			// Legacy "2024-01-01 10:00:00" in the session time zone (UTC).
			{"partition-timestamp-legacy", "ts", []int64{1704103200000000, 1704198600000000}},
			// ISO 8601 UTC, delta-spark 4.0's default; one row is null.
			{"partition-types", "p_timestamp", []int64{1704103200123456, 1704189600123456}},
			// Both forms in one table: Spark wrote 2020-01-01 08:09:10.001
			// in the legacy form, the others in ISO 8601.
			{"types-timestamp-int96", "part", []int64{-31536000000000, 1577866150001000, 1633075760000000}},
		} {
			s := load(t, tc.table, -1)
			schema, err := s.Schema()
			if err != nil {
				t.Fatal(err)
			}
			f, _ := schema.Field(tc.column)
			var micros []int64
			for _, a := range s.Files() {
				v := a.PartitionValues[tc.column]
				if v == nil {
					continue
				}
				got, err := ParsePartitionValue(v, f.Type)
				if err != nil {
					t.Fatal(err)
				}
				micros = append(micros, got.(interface{ UnixMicro() int64 }).UnixMicro())
			}
			slices.Sort(micros)
			if !slices.Equal(micros, tc.micros) {
				t.Fatalf("%s: timestamps %v, want %v", tc.table, micros, tc.micros)
			}
		}
	})
	t.Run("typed partition values parse", func(t *testing.T) {
		s := load(t, "partition-types", -1)
		schema, err := s.Schema()
		if err != nil {
			t.Fatal(err)
		}
		nulls := 0
		for _, a := range s.Files() {
			for _, col := range s.Metadata.PartitionColumns {
				f, _ := schema.Field(col)
				v := a.PartitionValues[col]
				if v == nil {
					nulls++
					continue
				}
				if _, err := ParsePartitionValue(v, f.Type); err != nil {
					t.Errorf("%s = %q (%s): %v", col, *v, f.Type.Name, err)
				}
			}
		}
		if want := len(s.Metadata.PartitionColumns); nulls != want {
			t.Errorf("%d null partition values, want %d (one all-null row)", nulls, want)
		}
	})
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
