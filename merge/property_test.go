package merge

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// modelRow is one changelog row of the property test.
type modelRow struct {
	k1     int64
	k2     string
	op     string // "" = null
	weight int64
	v      *int64
	s      *string
}

func (r modelRow) key() string { return fmt.Sprintf("%d|%s", r.k1, r.k2) }

func (r modelRow) live() string {
	v, s := "(null)", "(null)"
	if r.v != nil {
		v = fmt.Sprint(*r.v)
	}
	if r.s != nil {
		s = *r.s
	}
	return fmt.Sprintf("%d|%s|%s|%s", r.k1, r.k2, v, s)
}

// model collapses rows the simple way: a map from key to the deciding row
// and its stream position.
func model(rows []modelRow, weighted bool) (live, deleted []string) {
	type st struct {
		pos    int
		weight int64
	}
	m := map[string]*st{}
	for i, r := range rows {
		e := m[r.key()]
		if e == nil {
			e = &st{pos: i}
			m[r.key()] = e
		} else if !weighted || r.weight > 0 {
			e.pos = i
		}
		switch {
		case weighted:
			e.weight += r.weight
		case r.op == "D":
			e.weight = 0
		default:
			e.weight = 1
		}
	}
	var order []*st
	for _, e := range m {
		order = append(order, e)
	}
	slices.SortFunc(order, func(a, b *st) int { return a.pos - b.pos })
	for _, e := range order {
		r := rows[e.pos]
		if e.weight > 0 {
			live = append(live, r.live())
		} else {
			deleted = append(deleted, fmt.Sprintf("%d|%s", r.k1, r.k2))
		}
	}
	return live, deleted
}

func randomRows(rng *rand.Rand, n, keySpace int, weighted bool) []modelRow {
	ops := []string{"I", "U", "r", "D", ""}
	rows := make([]modelRow, n)
	for i := range rows {
		k := rng.IntN(keySpace)
		r := modelRow{k1: int64(k % 7), k2: fmt.Sprint("k", k/7), op: ops[rng.IntN(len(ops))], weight: 1}
		if weighted {
			r.weight = []int64{1, 1, -1, -1, 2, 0}[rng.IntN(6)]
		}
		if rng.IntN(4) > 0 {
			v := rng.Int64N(1000)
			r.v = &v
		}
		if rng.IntN(4) > 0 {
			s := fmt.Sprint("s", rng.IntN(1000))
			r.s = &s
		}
		rows[i] = r
	}
	return rows
}

// buildBatch builds rows as a record, padded with junk rows on both sides
// and sliced when sliced is set, so arrays carry non-zero offsets.
func buildBatch(mem memory.Allocator, schema *arrow.Schema, rows []modelRow, sliced bool) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	junk := modelRow{k1: -1, k2: "junk", op: "X"}
	all := rows
	if sliced {
		all = append(append([]modelRow{junk}, rows...), junk)
	}
	for _, r := range all {
		b.Field(0).(*array.Int64Builder).Append(r.k1)
		b.Field(1).(*array.StringBuilder).Append(r.k2)
		if r.op == "" {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(r.op)
		}
		b.Field(3).(*array.Int64Builder).Append(r.weight)
		if r.v == nil {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.Int64Builder).Append(*r.v)
		}
		if r.s == nil {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.StringBuilder).Append(*r.s)
		}
		b.Field(6).(*array.Int64Builder).Append(123)
	}
	rec := b.NewRecordBatch()
	if !sliced {
		return rec
	}
	defer rec.Release()
	return rec.NewSlice(1, int64(len(rows)+1))
}

func TestCollapseMatchesModel(t *testing.T) {
	for _, weighted := range []bool{false, true} {
		t.Run(fmt.Sprint("weighted=", weighted), func(t *testing.T) {
			fields := []arrow.Field{
				{Name: "k1", Type: arrow.PrimitiveTypes.Int64},
				{Name: "k2", Type: arrow.BinaryTypes.String},
				{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true},
				{Name: "__weight", Type: arrow.PrimitiveTypes.Int64},
				{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
				{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
				{Name: "_ts_ms", Type: arrow.PrimitiveTypes.Int64},
			}
			full := arrow.NewSchema(fields, nil)
			schema := full
			if !weighted {
				schema = arrow.NewSchema(slices.Delete(fields, 3, 4), nil)
			}
			for seed := range uint64(60) {
				rng := rand.New(rand.NewPCG(seed, 42))
				mem := checkedMem(t)
				rows := randomRows(rng, 1+rng.IntN(400), 1+rng.IntN(120), weighted)
				c, err := NewCollapser(schema, Options{Keys: []string{"k1", "k2"}, Allocator: mem})
				if err != nil {
					t.Fatal(err)
				}
				for rest := rows; len(rest) > 0; {
					n := min(len(rest), 1+rng.IntN(50))
					rec := buildBatch(mem, full, rest[:n], rng.IntN(2) == 0)
					if !weighted {
						rec = dropColumn(rec, 3)
					}
					if err := c.Add(rec); err != nil {
						t.Fatal(err)
					}
					rec.Release()
					rest = rest[n:]
				}
				res, err := c.Result()
				if err != nil {
					t.Fatal(err)
				}
				wantLive, wantDeleted := model(rows, weighted)
				equalStrings(t, fmt.Sprint("seed ", seed, " live"), rowStrings(res.Live), wantLive)
				equalStrings(t, fmt.Sprint("seed ", seed, " deleted"), rowStrings(res.Deleted), wantDeleted)
				if got := strings.Join(fieldNames(res.Schema), ","); got != "k1,k2,v,s" {
					t.Errorf("live schema %s", got)
				}
				res.Release()
			}
		})
	}
}

// dropColumn returns rec without column i, releasing rec.
func dropColumn(rec arrow.RecordBatch, i int) arrow.RecordBatch {
	defer rec.Release()
	fields := slices.Delete(slices.Clone(rec.Schema().Fields()), i, i+1)
	cols := slices.Delete(slices.Clone(rec.Columns()), i, i+1)
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}
