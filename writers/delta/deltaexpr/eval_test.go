package deltaexpr

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// testRecord has four rows; row 3 is NULL in every column (and its
// struct).
func testRecord(t *testing.T) arrow.RecordBatch {
	t.Helper()
	inner := arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "Price", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "d", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "ntz", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true},
		{Name: "st", Type: inner, Nullable: true},
		{Name: "weird col", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "ntzus", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "tsus", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "America/New_York"}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	valid := []bool{true, true, true, false}
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 5, -3, 0}, valid)
	b.Field(1).(*array.Decimal128Builder).AppendValues([]decimal128.Num{decimal128.FromI64(150), decimal128.FromI64(10000), decimal128.FromI64(-1), {}}, valid)
	b.Field(2).(*array.Float32Builder).AppendValues([]float32{0.1, 16777216, float32(math.NaN()), 0}, valid)
	b.Field(3).(*array.Float64Builder).AppendValues([]float64{0.1, 2.5, math.NaN(), 0}, valid)
	b.Field(4).(*array.StringBuilder).AppendValues([]string{"a", "it's", "", ""}, valid)
	b.Field(5).(*array.BooleanBuilder).AppendValues([]bool{true, false, true, false}, valid)
	b.Field(6).(*array.Date32Builder).AppendValues([]arrow.Date32{19723, 19724, 0, 0}, valid) // 2024-01-01, 2024-01-02, 1970-01-01
	b.Field(7).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1704067200000000, 1704067200000001, 0, 0}, valid)
	b.Field(8).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1704067200000000000, 1704153600000000000, -1, 0}, valid)
	sb := b.Field(9).(*array.StructBuilder)
	for i, v := range []int32{7, 0, 9, 0} {
		switch i {
		case 1: // the struct is valid, its field NULL
			sb.Append(true)
			sb.FieldBuilder(0).AppendNull()
		case 3:
			sb.AppendNull()
			sb.FieldBuilder(0).AppendNull()
		default:
			sb.Append(true)
			sb.FieldBuilder(0).(*array.Int32Builder).Append(v)
		}
	}
	b.Field(10).(*array.Int8Builder).AppendValues([]int8{1, 2, 3, 0}, valid)
	// 2019-01-01, 2024-01-01, a microsecond before the epoch.
	b.Field(11).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1546300800000000, 1704067200000000, -1, 0}, valid)
	b.Field(12).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1546300800000000, 1704067200000000, -1, 0}, valid)
	return b.NewRecordBatch()
}

// wantEvals checks evalAll of each expression of cases over rec.
func wantEvals(t *testing.T, rec arrow.RecordBatch, cases map[string]string) {
	t.Helper()
	for text, want := range cases {
		if got := evalAll(t, text, rec); got != want {
			t.Errorf("%s: got %s, want %s", text, got, want)
		}
	}
}

// evalAll evaluates text over rec: T, F or N per row.
func evalAll(t *testing.T, text string, rec arrow.RecordBatch) string {
	t.Helper()
	e, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	b, err := e.Bind(rec.Schema())
	if err != nil {
		t.Fatalf("Bind(%q): %v", text, err)
	}
	out := b.eval(rec, &scratch{})
	var s strings.Builder
	for _, v := range out {
		s.WriteByte("FTN"[v])
	}
	return s.String()
}

func TestConstraintEval(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	wantEvals(t, rec, map[string]string{
		"id > 0":                                   "TTFN",
		"ntzus >= DATE '2020-01-01'":               "FTFN", // the date's midnight, in microseconds
		"DATE '2020-01-01' > ntzus":                "TFTN",
		"ntzus < DATE '1970-01-01'":                "FFTN",
		"tsus >= TIMESTAMP '2020-01-01 00:00:00Z'": "FTFN",
		"id >= -3 AND id <= 1":                     "TFTN",
		"id = 1 OR id IS NULL":                     "TFFT",
		"id IS NOT NULL":                           "TTTF",
		"NOT id > 0":                               "FFTN",
		"id IN (1, 5)":                             "TTFN",
		"id NOT IN (1, 5)":                         "FFTN",
		"id IN (1, NULL)":                          "TNNN",
		"id NOT IN (7, NULL)":                      "NNNN",
		"id BETWEEN 0 AND 4":                       "TFFN",
		"id NOT BETWEEN 0 AND 4":                   "FTTN",
		"id <=> NULL":                              "FFFT",
		"id <=> 5":                                 "FTFF",
		"NULL <=> NULL":                            "TTTT",
		"id > NULL":                                "NNNN",
		"id > 0 OR id < 0":                         "TTTN",
		"id > 0 AND id < 0":                        "FFFN",
		"id > 0 OR NULL":                           "TTNN",
		"id > 0 AND NULL":                          "NNFN",
		"price > 1.5":                              "FTFN", // case-insensitive column; decimal 1.50, 100.00, -0.01
		"price >= 1.50":                            "TTFN",
		"price = 1.5 OR price < 0":                 "TFTN",
		"price > 1.499":                            "TTFN", // compared at the literal's scale
		"price < 2":                                "TFTN",
		"price < id":                               "FFFN",
		"price > 1.4e0":                            "TTFN", // double
		"f = 16777217":                             "FTFN", // float comparison as Spark: 16777217 rounds to 16777216f
		"d = 16777217":                             "FFFN",
		"d > 1e300":                                "FFTN", // NaN is above every value
		"d = d":                                    "TTTN", // NaN = NaN
		"f < 1":                                    "TFFN",
		"d BETWEEN 0.1 AND 2.5":                    "TTFN",
		"s = 'it\\'s'":                             "FTFN",
		"s = \"it's\"":                             "FTFN",
		"s = 'it''s'":                              "FFFN", // 'it' 's': no '' escape in Spark
		"s > ''":                                   "TTFN",
		"s <> \"a\"":                               "FTTN",
		"s IN ('a', 'b')":                          "TFFN",
		"flag":                                     "TFTN",
		"flag = TRUE":                              "TFTN",
		"NOT flag":                                 "FTFN",
		"flag = 'false'":                           "FTFN",
		"(id > 0) = flag":                          "TFFN",
		"(id > 0) IS NULL":                         "FFFT",
		"day = DATE '2024-01-02'":                  "FTFN",
		"day >= '2024-01-01'":                      "TTFN",
		"ts > TIMESTAMP '2024-01-01 00:00:00Z'":    "FTFN",
		"ts >= '2024-01-01T01:00:00+01:00'":        "TTFN",
		"ntz >= TIMESTAMP '2024-01-02'":            "FTFN",
		"ntz < DATE '2024-01-02'":                  "TFTN",
		"ntz < '1970-01-01'":                       "FFTN", // -1ns rounds down to -1µs
		"st.x > 5":                                 "TNTN",
		"st.x IS NULL":                             "FTFT",
		"`weird col` < 3":                          "TTFN",
		"TRUE":                                     "TTTT",
		"FALSE OR NULL":                            "NNNN",
		"1 = 1.0":                                  "TTTT",
		"'b' > 'a'":                                "TTTT",
		"5 > id":                                   "TFTN", // literal first: mirrored
		"5 <= id":                                  "FTFN",
		"2.5 <> d":                                 "TFTN",
		"'a' = s":                                  "TFFN",
		"-3 = `weird col`":                         "FFFN",
		"st.x = 7":                                 "TNFN",
	})
}

func TestConstraintBindRefuses(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	for text, want := range map[string]string{
		"s > 1":                                  "comparison of string and integer",
		"id = '5'":                               "string literal compared with a number",
		"price > '1.5'":                          "string literal compared with a number",
		"flag = 'yes'":                           "compared with a boolean",
		"day > 1":                                "comparison of date and integer",
		"ts > TIMESTAMP '2024-01-01 00:00:00'":   "without a time zone",
		"ntz > TIMESTAMP '2024-01-01 00:00:00Z'": "with a time zone",
		"id":                                     "not a condition",
		"missing > 0":                            "does not exist",
		"id.x > 0":                               "not a struct",
		"st > 0":                                 "struct",
		"price > 1.123456789012345678901234567890123456": "more than 38 digits",
		"day = ts": "comparison of date and timestamp",
		"flag = 1": "comparison of boolean and integer",
	} {
		e, err := Parse(text)
		if err == nil {
			_, err = e.Bind(rec.Schema())
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", text, err, want)
		}
	}
	// An invalid date is a value error, not outside the subset.
	e, _ := Parse("day = 'x'")
	if _, err := e.Bind(rec.Schema()); errors.Is(err, ErrUnsupported) {
		t.Errorf("a bad string literal is a value error, not ErrUnsupported: %v", err)
	}
}

func TestConstraintFirstViolation(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	e, err := Parse("id > -10 AND st.x <> 0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Bind(rec.Schema())
	if err != nil {
		t.Fatal(err)
	}
	row, found := b.FirstViolation(rec)
	if !found || row != 1 {
		t.Fatalf("FirstViolation = %d, %v; want row 1 (st.x is NULL)", row, found)
	}
	if got, want := b.RowValues(rec, row), "id=5, st.x=NULL"; got != want {
		t.Errorf("RowValues = %q, want %q", got, want)
	}
	dec, _ := Parse("price < 0 AND s = ''")
	decBound, _ := dec.Bind(rec.Schema())
	if got, want := decBound.RowValues(rec, 0), "price=1.50, s=a"; got != want { // as the expression names it
		t.Errorf("RowValues = %q, want %q", got, want)
	}
	ok, _ := Parse("id IS NULL OR id > -10")
	bound, err := ok.Bind(rec.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if row, found := bound.FirstViolation(rec); found {
		t.Errorf("FirstViolation = %d on a satisfied constraint", row)
	}
	if got := b.RowValues(rec, 3); got != "id=NULL, st.x=NULL" {
		t.Errorf("RowValues(null row) = %q", got)
	}
}

func TestConstraintSliced(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	tail := rec.NewSlice(1, 4)
	defer tail.Release()
	if got := evalAll(t, "st.x > 5 OR st.x IS NULL", tail); got != "TTT" {
		t.Errorf("sliced struct: %s", got)
	}
}

// TestConstraintSharedOperands: the operand BETWEEN and IN compare more
// than once is bound and evaluated once, so nesting them costs work
// linear in the text, not exponential.
func TestConstraintSharedOperands(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	nested := func(levels int, wrap func(string) string) string {
		text := "flag"
		for range levels {
			text = wrap(text)
		}
		return text
	}
	in := "(TRUE" + strings.Repeat(", FALSE", 40) + ")"
	for _, c := range []struct {
		name, text string
		levels     int
		want       string
	}{
		{"BETWEEN", nested(60, func(s string) string { return "(" + s + ") BETWEEN FALSE AND TRUE" }), 60, "TTTN"},
		{"IN", nested(30, func(s string) string { return "(" + s + ") IN " + in }), 30, "TTTN"},
	} {
		e, err := Parse(c.text)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, err := e.Bind(rec.Schema())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// Each level binds its comparisons and their conjunction once.
		perLevel := 100 // IN: 41 comparisons, each reading the shared operand
		if b.nodes > c.levels*perLevel {
			t.Errorf("%s: %d predicates bound for %d levels", c.name, b.nodes, c.levels)
		}
		sc := &scratch{}
		var got strings.Builder
		for _, v := range b.eval(rec, sc) {
			got.WriteByte("FTN"[v])
		}
		if got.String() != c.want {
			t.Errorf("%s = %s, want %s", c.name, got.String(), c.want)
		}
		if sc.evals > c.levels*perLevel {
			t.Errorf("%s: %d predicates evaluated for %d levels", c.name, sc.evals, c.levels)
		}
	}
}

// TestConstraintDottedNames: a top-level column named a.b and the member
// b of a struct a are different columns.
func TestConstraintDottedNames(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a.b", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "a", Type: arrow.StructOf(arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, -1}, nil)
	sb := b.Field(1).(*array.StructBuilder)
	for _, v := range []string{"x", "y"} {
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append(v)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	wantEvals(t, rec, map[string]string{
		"`a.b` > 0 AND a.b = 'x'": "TF",
		"a.b = 'y' OR `a.b` > 0":  "TT",
		"a.b = 'x' AND `a.b` < 0": "FF",
	})
	e, _ := Parse("`a.b` < 0 AND a.b = 'y'")
	bound, err := e.Bind(schema)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := bound.RowValues(rec, 0), "a.b=1, a.b=x"; got != want {
		t.Errorf("RowValues = %q, want %q", got, want)
	}
}

// TestConstraintDecimals: an integer literal compared with a wide
// decimal takes the precision of its digits (as Spark's
// literalPickMinimumPrecision); a decimal compared with a double is its
// nearest double (2.9 at scale 1 is 2.9D), whatever its precision.
func TestConstraintDecimals(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "wide", Type: &arrow.Decimal128Type{Precision: 38, Scale: 20}, Nullable: true},
		{Name: "tenth", Type: &arrow.Decimal128Type{Precision: 10, Scale: 1}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	tenth, _ := decimal128.FromString("0.1", 38, 20)
	negWide, _ := decimal128.FromString("-12345678.12345678901234567890", 38, 20)
	b.Field(0).(*array.Decimal128Builder).AppendValues([]decimal128.Num{tenth, negWide}, nil)
	b.Field(1).(*array.Decimal128Builder).AppendValues([]decimal128.Num{decimal128.FromI64(29), decimal128.FromI64(-71)}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	wantEvals(t, rec, map[string]string{
		"wide >= 0":                      "TF",
		"wide BETWEEN -1 AND 5":          "TF",
		"0 < wide":                       "TF",
		"wide = 0.1D":                    "TF",
		"wide < -12345678.123456789D":    "FF", // -12345678.123456789012… rounds to that double
		"wide <= -12345678.123456789D":   "FT",
		"tenth = 2.9D":                   "TF",
		"tenth = -7.1D":                  "FT",
		"tenth IN (2.9D, 1.0D)":          "TF",
		"wide IN (0, 1) OR wide IS NULL": "FF",
	})
}
