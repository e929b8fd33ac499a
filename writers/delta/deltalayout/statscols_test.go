package deltalayout

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// Data files carry statistics for the columns Spark would collect them
// for: delta.dataSkippingStatsColumns, else the first
// delta.dataSkippingNumIndexedCols leaves (32 by default), partition
// columns not counted.
func TestStatsColumns(t *testing.T) {
	i64 := arrow.PrimitiveTypes.Int64
	schema, err := deltalog.FromArrow(arrow.NewSchema([]arrow.Field{
		{Name: "p", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "a", Type: i64},
		{Name: "s", Type: arrow.StructOf(
			arrow.Field{Name: "x", Type: i64, Nullable: true},
			arrow.Field{Name: "y", Type: arrow.StructOf(
				arrow.Field{Name: "z", Type: arrow.BinaryTypes.String, Nullable: true},
				arrow.Field{Name: "w", Type: i64, Nullable: true},
			), Nullable: true},
		), Nullable: true},
		{Name: "arr", Type: arrow.ListOf(i64), Nullable: true},
		{Name: "d.e", Type: i64, Nullable: true},
		{Name: "we`ird", Type: i64, Nullable: true},
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"a", "arr", "d.e", "s.x", "s.y.w", "s.y.z", "we`ird"}
	cases := []struct {
		num, cols string // "" leaves the property out
		want      []string
	}{
		{"", "", all},
		{"-1", "", all},
		{"0", "", nil},
		{"1", "", []string{"a"}},
		{"2", "", []string{"a", "s.x"}},
		{"3", "", []string{"a", "s.x", "s.y.z"}},
		{"5", "", []string{"a", "arr", "s.x", "s.y.w", "s.y.z"}},
		{"100", "", all},
		{"", "s.y, `d.e`", []string{"d.e", "s.y.w", "s.y.z"}},
		{"", " A , S.X ", []string{"a", "s.x"}},
		{"", "`s`.`y`.z,`we``ird`", []string{"s.y.z", "we`ird"}},
		{"1", "arr", []string{"arr"}}, // the list wins over the count
		{"", "p, nope, s.nope, a", []string{"a"}},
	}
	for _, c := range cases {
		conf := map[string]string{}
		if c.num != "" {
			conf["delta.dataSkippingNumIndexedCols"] = c.num
		}
		if c.cols != "" {
			conf["delta.dataSkippingStatsColumns"] = c.cols
		}
		cols, err := StatsColumnsOf(schema, []string{"p"}, conf)
		if err != nil {
			t.Errorf("%v: %v", conf, err)
			continue
		}
		var got []string
		for _, leaf := range []string{"p", "a", "s.x", "s.y.z", "s.y.w", "arr", "d.e", "we`ird"} {
			path := strings.Split(leaf, ".")
			if leaf == "d.e" {
				path = []string{leaf}
			}
			if cols.Has(path) {
				got = append(got, leaf)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: stats for %v, want %v", conf, got, c.want)
		}
	}
	for _, conf := range []map[string]string{
		{"delta.dataSkippingNumIndexedCols": "x"},
		{"delta.dataSkippingNumIndexedCols": "-2"},
		{"delta.dataSkippingStatsColumns": "a,,b"},
		{"delta.dataSkippingStatsColumns": "`a"},
		{"delta.dataSkippingStatsColumns": "`a`b"},
		{"delta.dataSkippingStatsColumns": "a.`b"},
	} {
		if _, err := StatsColumnsOf(schema, nil, conf); !errors.Is(err, deltalog.ErrCorrupt) {
			t.Errorf("%v: %v, want deltalog.ErrCorrupt", conf, err)
		}
	}
	// The default counts 32 leaves.
	var fields []arrow.Field
	for i := range 40 {
		fields = append(fields, arrow.Field{Name: fmt.Sprint("c", i), Type: i64})
	}
	wide, _ := deltalog.FromArrow(arrow.NewSchema(fields, nil))
	cols, err := StatsColumnsOf(wide, nil, nil)
	if err != nil || !cols.Has([]string{"c31"}) || cols.Has([]string{"c32"}) {
		t.Errorf("default: c31 %v, c32 %v (%v), want the first 32 columns", cols.Has([]string{"c31"}), cols.Has([]string{"c32"}), err)
	}
}
