package merge

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/writers"
)

var changelogSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "_ts_ms", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

func TestCollapseLastWinsAcrossBatches(t *testing.T) {
	mem := checkedMem(t)
	res, err := collapseAll(t, mem, []string{"id"},
		fromJSON(t, mem, changelogSchema, `[
			{"id":1,"_op":"I","name":"a","amount":1},
			{"id":2,"_op":"I","name":"b","amount":2},
			{"id":3,"_op":"I","name":"c","amount":3},
			{"id":4,"_op":"I","name":"d","amount":4}]`),
		fromJSON(t, mem, changelogSchema, `[
			{"id":2,"_op":"U","name":"b2","amount":null},
			{"id":3,"_op":"D","name":"c","amount":3},
			{"id":4,"_op":"D","name":"d","amount":4},
			{"id":5,"_op":"D","name":"e","amount":5}]`),
		fromJSON(t, mem, changelogSchema, `[
			{"id":4,"_op":"r","name":"d3","amount":40},
			{"id":1,"_op":null,"name":null,"amount":10},
			{"id":2,"_op":"U","name":"b3","amount":null}]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	// Live rows follow the stream order of their deciding row; nulls in
	// value columns survive.
	equalStrings(t, "live", rowStrings(res.Live), []string{"4|d3|40", "1|(null)|10", "2|b3|(null)"})
	equalStrings(t, "deleted", rowStrings(res.Deleted), []string{"3", "5"})
	if got := fieldNames(res.Schema); strings.Join(got, ",") != "id,name,amount" {
		t.Errorf("live schema %v, want metadata stripped", got)
	}
	for _, rec := range res.Live {
		if !rec.Schema().Equal(res.Schema) {
			t.Errorf("live record schema %s, want %s", rec.Schema(), res.Schema)
		}
	}
	if got := fieldNames(res.KeySchema); strings.Join(got, ",") != "id" {
		t.Errorf("key schema %v, want id", got)
	}
	if res.RowsIn != 11 || res.LiveRows != 3 || res.DeletedRows != 2 || res.Keys.Len() != 5 {
		t.Errorf("counts in=%d live=%d deleted=%d keys=%d, want 11 3 2 5", res.RowsIn, res.LiveRows, res.DeletedRows, res.Keys.Len())
	}
}

func TestCollapseWeights(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "__weight", Type: arrow.PrimitiveTypes.Int64},
		{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	type row struct {
		w  int64
		v  string
		op string
	}
	for _, tc := range []struct {
		name string
		rows []row
		live string // "" = deleted
	}{
		{"insert", []row{{1, "a", "I"}}, "a"},
		{"insert then retract", []row{{1, "a", "I"}, {-1, "a", "I"}}, ""},
		{"+1 +1 -1 keeps the latest positive row", []row{{1, "a", "I"}, {1, "b", "I"}, {-1, "a", "I"}}, "b"},
		{"retract only", []row{{-1, "a", "I"}}, ""},
		{"retract then insert", []row{{-1, "a", "I"}, {1, "b", "I"}}, ""},
		{"retract then insert twice", []row{{-1, "a", "I"}, {1, "b", "I"}, {1, "c", "I"}}, "c"},
		{"update as retract+insert", []row{{1, "a", "I"}, {-1, "a", "I"}, {1, "c", "I"}}, "c"},
		{"weight two then retract", []row{{2, "a", "I"}, {-1, "a", "I"}}, "a"},
		{"zero weight", []row{{0, "a", "I"}}, ""},
		{"zero weight row is not positive", []row{{1, "a", "I"}, {0, "z", "I"}}, "a"},
		{"weight decides over _op D", []row{{1, "a", "D"}}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			var js []string
			for _, r := range tc.rows {
				js = append(js, fmt.Sprintf(`{"id":7,"v":%q,"__weight":%d,"_op":%q}`, r.v, r.w, r.op))
			}
			// One row per batch: the semantics must hold across batches.
			var recs []arrow.RecordBatch
			for _, j := range js {
				recs = append(recs, fromJSON(t, mem, schema, "["+j+"]"))
			}
			res, err := collapseAll(t, mem, []string{"id"}, recs...)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			var wantLive, wantDeleted []string
			if tc.live != "" {
				wantLive = []string{"7|" + tc.live}
			} else {
				wantDeleted = []string{"7"}
			}
			equalStrings(t, "live", rowStrings(res.Live), wantLive)
			equalStrings(t, "deleted", rowStrings(res.Deleted), wantDeleted)
		})
	}
}

func TestCollapseRowErrors(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "__weight", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	for _, tc := range []struct {
		name, bad string
		column    string
	}{
		{"null key", `{"id":null,"_op":"I","__weight":1}`, "id"},
		{"bad op", `{"id":9,"_op":"X","__weight":1}`, "_op"},
		{"null weight", `{"id":9,"_op":"I","__weight":null}`, "__weight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			c, err := NewCollapser(schema, Options{Keys: []string{"id"}, Allocator: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			good := fromJSON(t, mem, schema, `[{"id":1,"_op":"I","__weight":1},{"id":2,"_op":"I","__weight":1}]`)
			defer good.Release()
			if err := c.Add(good); err != nil {
				t.Fatal(err)
			}
			bad := fromJSON(t, mem, schema, `[{"id":3,"_op":"I","__weight":1},`+tc.bad+`]`)
			defer bad.Release()
			err = c.Add(bad)
			var re *RowError
			if !errors.As(err, &re) || !errors.Is(err, writers.ErrInvalid) {
				t.Fatalf("got %v, want a *RowError wrapping ErrInvalid", err)
			}
			if re.Row != 1 || re.StreamRow != 3 || re.Column != tc.column {
				t.Errorf("got %+v, want row 1, stream row 3, column %s", re, tc.column)
			}
			if msg := err.Error(); !strings.Contains(msg, "row 1") || !strings.Contains(msg, "stream row 3") {
				t.Errorf("message %q does not name the row", msg)
			}
			// The bad batch was not applied and the Collapser goes on.
			if err := c.Add(good); err != nil {
				t.Fatal(err)
			}
			res, err := c.Result()
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			equalStrings(t, "live", rowStrings(res.Live), []string{"1", "2"})
			if res.RowsIn != 4 {
				t.Errorf("RowsIn = %d, want 4", res.RowsIn)
			}
		})
	}
}

func TestCollapseLifecycleErrors(t *testing.T) {
	mem := checkedMem(t)
	c, err := NewCollapser(changelogSchema, Options{Keys: []string{"id"}, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	rec := fromJSON(t, mem, other, `[{"id":1}]`)
	defer rec.Release()
	if err := c.Add(rec); !errors.Is(err, writers.ErrInvalid) {
		t.Errorf("Add of another schema: %v, want ErrInvalid", err)
	}
	res, err := c.Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Live)+len(res.Deleted) != 0 || res.RowsIn != 0 {
		t.Errorf("empty collapse gave %d live and %d deleted records", len(res.Live), len(res.Deleted))
	}
	res.Release()
	res.Release()
	if _, err := c.Result(); !errors.Is(err, writers.ErrWrongState) {
		t.Errorf("second Result: %v, want ErrWrongState", err)
	}
	good := fromJSON(t, mem, changelogSchema, `[{"id":1}]`)
	defer good.Release()
	if err := c.Add(good); !errors.Is(err, writers.ErrWrongState) {
		t.Errorf("Add after Result: %v, want ErrWrongState", err)
	}
	c.Close()
	c.Close()
}

func TestCollapseCloseReleasesBatches(t *testing.T) {
	mem := checkedMem(t)
	c, err := NewCollapser(changelogSchema, Options{Keys: []string{"id"}, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	rec := fromJSON(t, mem, changelogSchema, `[{"id":1,"name":"x"}]`)
	if err := c.Add(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if mem.CurrentAlloc() == 0 {
		t.Fatal("the Collapser did not retain its batch")
	}
	c.Close() // the checked allocator proves the release at test end
}

func TestCollapseReleasesSupersededBatches(t *testing.T) {
	mem := checkedMem(t)
	c, err := NewCollapser(changelogSchema, Options{Keys: []string{"id"}, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	add := func(js string) int {
		rec := fromJSON(t, mem, changelogSchema, js)
		size := mem.CurrentAlloc()
		if err := c.Add(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		return size
	}
	add(`[{"id":1,"name":"a"},{"id":2,"name":"b"}]`)
	before := mem.CurrentAlloc()
	after := add(`[{"id":2,"name":"c"},{"id":1,"_op":"D"}]`)
	// Every key now points into the second batch: the first is released,
	// so memory held equals the second batch alone.
	if got := mem.CurrentAlloc(); got != after-before {
		t.Errorf("held %d bytes, want %d (the second batch only)", got, after-before)
	}
}

func TestCollapseSlicedInput(t *testing.T) {
	mem := checkedMem(t)
	full := fromJSON(t, mem, changelogSchema, `[
		{"id":1,"_op":"I","name":"skip","amount":0},
		{"id":2,"_op":"I","name":"skip","amount":0},
		{"id":1,"_op":"I","name":"a","amount":null},
		{"id":3,"_op":"D","name":"x","amount":1},
		{"id":2,"_op":"U","name":null,"amount":2},
		{"id":3,"_op":"I","name":"skip","amount":0}]`)
	first, second := full.NewSlice(2, 4), full.NewSlice(4, 5)
	full.Release()
	res, err := collapseAll(t, mem, []string{"id", "name"}, first, second)
	if err == nil {
		res.Release()
		t.Fatal("null key column name accepted")
	}
	full = fromJSON(t, mem, changelogSchema, `[
		{"id":1,"_op":"I","name":"skip","amount":0},
		{"id":1,"_op":"I","name":"a","amount":null},
		{"id":3,"_op":"D","name":"x","amount":1},
		{"id":2,"_op":"U","name":null,"amount":2},
		{"id":1,"_op":"U","name":"b","amount":3},
		{"id":3,"_op":"I","name":"skip","amount":0}]`)
	first, second = full.NewSlice(1, 3), full.NewSlice(3, 5)
	full.Release()
	res, err = collapseAll(t, mem, []string{"id"}, first, second)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	equalStrings(t, "live", rowStrings(res.Live), []string{"2|(null)|2", "1|b|3"})
	equalStrings(t, "deleted", rowStrings(res.Deleted), []string{"3"})
}

func TestCollapseMultiColumnKeysEveryType(t *testing.T) {
	mem := checkedMem(t)
	// Rows 0 and 2 share every key column; row 1 and 3 differ from them
	// (row 3 only in the last column's parity for bool, elsewhere too).
	keys := keyRecord(t, mem, keyTypes, []int64{2, 3, 2, 4})
	defer keys.Release()
	vb := array.NewInt64Builder(mem)
	vb.AppendValues([]int64{100, 101, 102, 103}, []bool{true, true, false, true})
	vals := vb.NewArray()
	vb.Release()
	defer vals.Release()
	fields := append(keys.Schema().Fields(), arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), append(keys.Columns(), vals), 4)
	defer rec.Release()
	names := fieldNames(keys.Schema())
	res, err := Collapse(rec, Options{Keys: names, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if res.LiveRows != 3 || res.Keys.Len() != 3 {
		t.Fatalf("live %d rows, %d keys; want 3 and 3", res.LiveRows, res.Keys.Len())
	}
	var vs []string
	for _, r := range res.Live {
		col := r.Column(int(r.NumCols()) - 1)
		for i := range col.Len() {
			vs = append(vs, col.ValueStr(i))
		}
	}
	// Row 2 replaced row 0 (keeping its null value) at row 2's position.
	equalStrings(t, "values", vs, []string{"101", "(null)", "103"})
}

func TestCollapseOneShotErrors(t *testing.T) {
	mem := checkedMem(t)
	rec := fromJSON(t, mem, changelogSchema, `[{"id":1,"_op":"Z"}]`)
	defer rec.Release()
	if _, err := Collapse(rec, Options{Keys: []string{"id"}, Allocator: mem}); !errors.Is(err, writers.ErrInvalid) {
		t.Errorf("bad op: %v, want ErrInvalid", err)
	}
	if _, err := Collapse(rec, Options{Keys: []string{"missing"}, Allocator: mem}); !errors.Is(err, writers.ErrInvalid) {
		t.Errorf("missing key column: %v, want ErrInvalid", err)
	}
}

func TestCollapseValueColumnTypes(t *testing.T) {
	mem := checkedMem(t)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "sv", Type: arrow.BinaryTypes.StringView, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
	}, nil)
	res, err := collapseAll(t, mem, []string{"id"}, fromJSON(t, mem, schema, `[
		{"id":1,"l":[1,2],"st":{"x":"a"},"d":"p","sv":"a string view longer than twelve","ts":1704067200000000},
		{"id":2,"l":null,"st":null,"d":null,"sv":null,"ts":null},
		{"id":1,"l":[3,null],"st":{"x":null},"d":"q","sv":"b","ts":1704153600000000}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	equalStrings(t, "live", rowStrings(res.Live), []string{
		"2|(null)|(null)|(null)|(null)|(null)",
		`1|[3,null]|{"x":null}|q|b|2024-01-02T00:00:00Z`,
	})
}

func TestCollapseAddAllocatesNothingPerRow(t *testing.T) {
	mem := checkedMem(t)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "k", Type: arrow.BinaryTypes.String},
		{Name: "_op", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	for i := range 1000 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprint("k", i%10))
		b.Field(2).(*array.StringBuilder).Append("U")
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	c, err := NewCollapser(schema, Options{Keys: []string{"id", "k"}, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Add(rec); err != nil { // grows the buffers once
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if err := c.Add(rec); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("Add of 1000 known keys allocates %.1f times, want at most 2 (none per row)", allocs)
	}
}
