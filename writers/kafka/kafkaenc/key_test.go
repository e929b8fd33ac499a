package kafkaenc

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestKeys(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cases := []struct {
		name string
		typ  arrow.DataType
		in   string
		want []string // "<nil>" for a null key
	}{
		{"string", arrow.BinaryTypes.String, `[{"k":"user-1"},{"k":""},{"k":null}]`, []string{"user-1", "", "<nil>"}},
		{"int64", arrow.PrimitiveTypes.Int64, `[{"k":-42}]`, []string{"-42"}},
		{"float64", arrow.PrimitiveTypes.Float64, `[{"k":0.1}]`, []string{"0.1"}},
		{"bool", arrow.FixedWidthTypes.Boolean, `[{"k":true}]`, []string{"true"}},
		{"date", arrow.FixedWidthTypes.Date32, `[{"k":"2020-05-06"}]`, []string{"2020-05-06"}},
		{"timestamp", &arrow.TimestampType{Unit: arrow.Millisecond}, `[{"k":1588748889010}]`, []string{"2020-05-06T07:08:09.01Z"}},
		{"decimal", &arrow.Decimal128Type{Precision: 5, Scale: 1}, `[{"k":"-3.5"}]`, []string{"-3.5"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := build(t, mem, arrow.Field{Name: "k", Type: tc.typ, Nullable: true}, tc.in)
			k, err := NewKeys(rec.Schema(), "k")
			if err != nil {
				t.Fatal(err)
			}
			var out Batch
			if err := k.Encode(rec, &out); err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.want {
				got := out.Row(i)
				if (want == "<nil>") != (got == nil) || (got != nil && string(got) != want) {
					t.Errorf("key %d = %q (nil %v), want %q", i, got, got == nil, want)
				}
			}
		})
	}
}

func TestKeysRejectNested(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	if _, err := NewKeys(schema, "k"); err == nil || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("NewKeys(list) = %v, want an error naming the column", err)
	}
	if _, err := NewKeys(schema, "missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("NewKeys(missing) = %v, want an error naming the column", err)
	}
}
