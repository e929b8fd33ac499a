package delta

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/internal/duckcheck"
	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
)

// changelogCols are the table columns of the property test's changelogs.
var changelogCols = []string{"k1", "k2", "v", "s", "p"}

// changelogMeta says which metadata columns a changelog carries.
type changelogMeta int

const (
	metaOp     changelogMeta = iota // _op and _ts_ms
	metaWeight                      // __weight
	metaNone                        // table columns only: every row upserts
)

func changelogSchema(meta changelogMeta) *arrow.Schema {
	fields := []arrow.Field{
		{Name: "k1", Type: arrow.PrimitiveTypes.Int64},
		{Name: "k2", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "p", Type: arrow.BinaryTypes.String},
	}
	switch meta {
	case metaOp:
		fields = append(fields,
			arrow.Field{Name: merge.OpColumn, Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: merge.TsColumn, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	case metaWeight:
		fields = append(fields, arrow.Field{Name: merge.WeightColumn, Type: arrow.PrimitiveTypes.Int64})
	}
	return arrow.NewSchema(fields, nil)
}

// changeRow is one changelog row: its table values (rendered as the
// readers render them), its op and its weight.
type changeRow struct {
	k1     int64
	k2     string
	v      *float64
	s      *string
	p      string
	op     *string // metaOp
	weight int64   // metaWeight
}

func (r changeRow) text() string {
	v, s := nullText, nullText
	if r.v != nil {
		v = strconv.FormatFloat(*r.v, 'g', -1, 64)
	}
	if r.s != nil {
		s = *r.s
	}
	return strings.Join([]string{strconv.FormatInt(r.k1, 10), r.k2, v, s, r.p}, "|")
}

// upsertModel is the table as a map from key to row text.
type upsertModel struct {
	keys []string
	rows map[string]string
}

func (m *upsertModel) key(r changeRow) string {
	parts := make([]string, len(m.keys))
	for i, k := range m.keys {
		switch k {
		case "k1":
			parts[i] = strconv.FormatInt(r.k1, 10)
		case "k2":
			parts[i] = r.k2
		case "p":
			parts[i] = r.p
		}
	}
	return strings.Join(parts, "\x00")
}

// apply folds one transaction's changelog into the model: without
// weights the last row of a key wins (D deletes); with weights the net
// weight decides and the latest positive row is the live one.
func (m *upsertModel) apply(rows []changeRow, meta changelogMeta) {
	type state struct {
		live   *changeRow
		weight int64
	}
	order := []string{}
	states := map[string]*state{}
	for _, r := range rows {
		k := m.key(r)
		st := states[k]
		if st == nil {
			st = &state{}
			states[k] = st
			order = append(order, k)
		}
		switch meta {
		case metaWeight:
			st.weight += r.weight
			if r.weight > 0 {
				st.live = &r
			}
		default:
			st.weight = 1
			if r.op != nil && *r.op == "D" {
				st.weight = 0
			}
			st.live = &r
		}
	}
	for _, k := range order {
		if st := states[k]; st.weight > 0 {
			m.rows[k] = st.live.text()
		} else {
			delete(m.rows, k)
		}
	}
}

func (m *upsertModel) sorted() []string {
	out := make([]string, 0, len(m.rows))
	for _, r := range m.rows {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// randomChanges draws n changelog rows over a small key space, so keys
// repeat within and across transactions.
func randomChanges(rng *rand.Rand, meta changelogMeta, n int) []changeRow {
	ops := []string{"I", "U", "r", "D", "D"}
	words := []string{"", "a", "quiver", "ümlaut", "x y"}
	parts := []string{"2026-01-01", "2026-01-02", "a b/c:d"}
	rows := make([]changeRow, n)
	for i := range rows {
		r := changeRow{k1: rng.Int64N(30), k2: []string{"x", "y"}[rng.IntN(2)], p: parts[rng.IntN(len(parts))]}
		if rng.IntN(5) > 0 {
			v := float64(rng.IntN(100000)) / 8
			r.v = &v
		}
		if rng.IntN(4) > 0 {
			s := words[rng.IntN(len(words))]
			r.s = &s
		}
		switch meta {
		case metaOp:
			if rng.IntN(6) > 0 {
				op := ops[rng.IntN(len(ops))]
				r.op = &op
			}
		case metaWeight:
			r.weight = []int64{1, 1, -1}[rng.IntN(3)]
		}
		rows[i] = r
	}
	return rows
}

// changelogBatch builds the record of rows.
func changelogBatch(mem memory.Allocator, meta changelogMeta, rows []changeRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, changelogSchema(meta))
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.k1)
		b.Field(1).(*array.StringBuilder).Append(r.k2)
		if r.v == nil {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(*r.v)
		}
		if r.s == nil {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.StringBuilder).Append(*r.s)
		}
		b.Field(4).(*array.StringBuilder).Append(r.p)
		switch meta {
		case metaOp:
			if r.op == nil {
				b.Field(5).AppendNull()
			} else {
				b.Field(5).(*array.StringBuilder).Append(*r.op)
			}
			b.Field(6).(*array.Int64Builder).Append(1_700_000_000_000)
		case metaWeight:
			b.Field(5).(*array.Int64Builder).Append(r.weight)
		}
	}
	return b.NewRecordBatch()
}

// TestUpsertProperty: many rounds of random changelogs (inserts, updates,
// deletes, repeated keys, __weight retractions, a two-column key, nulls in
// value columns), one transaction each, into an unpartitioned table, a
// table partitioned by a value column (rows move between partitions) and
// one partitioned by a key column, copy-on-write and with deletion
// vectors (with the key index, without, and with one too small to hold
// the table). After every commit the table read back by our reader and by
// DuckDB over the active files (rows of deletion vectors left out) equals
// the model.
func TestUpsertProperty(t *testing.T) {
	rounds := 14
	if testing.Short() {
		rounds = 4
	}
	for _, tc := range []struct {
		name      string
		partition []string
		keys      []string
		dvs       bool
		maxBytes  int64 // key_index_max_bytes
	}{
		{"unpartitioned", nil, []string{"k1", "k2"}, false, DefaultKeyIndexMaxBytes},
		{"partitioned", []string{"p"}, []string{"k1", "k2"}, false, DefaultKeyIndexMaxBytes},
		{"partition-key", []string{"p"}, []string{"k2", "p", "k1"}, false, DefaultKeyIndexMaxBytes},
		{"unpartitioned-dv", nil, []string{"k1", "k2"}, true, DefaultKeyIndexMaxBytes},
		{"partitioned-dv", []string{"p"}, []string{"k1", "k2"}, true, DefaultKeyIndexMaxBytes},
		{"partition-key-dv", []string{"p"}, []string{"k2", "p", "k1"}, true, DefaultKeyIndexMaxBytes},
		{"partition-key-dv-no-index", []string{"p"}, []string{"k2", "p", "k1"}, true, 0},
		{"unpartitioned-dv-tiny-index", nil, []string{"k1", "k2"}, true, 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := checkedMem(t)
			rng := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
			cfg := testConfig(fileURI(t), func(c *Config) {
				c.WriteMode, c.MergeKeys, c.PartitionBy = ModeUpsert, tc.keys, tc.partition
				c.Parquet.RowGroupRows = 16
				c.DeletionVectors, c.KeyIndexMaxBytes = tc.dvs, tc.maxBytes
			})
			w := openWriter(t, cfg, mem)
			db := duckcheck.Open(t)
			model := &upsertModel{keys: tc.keys, rows: map[string]string{}}
			for round := range rounds {
				meta := changelogMeta(round % 3)
				key := writers.TxnKey{Writer: "prop", Epoch: int64(round)}
				var all []changeRow
				var recs []arrow.RecordBatch
				for range 1 + rng.IntN(3) {
					rows := randomChanges(rng, meta, 1+rng.IntN(40))
					all = append(all, rows...)
					recs = append(recs, changelogBatch(mem, meta, rows))
				}
				commitOne(t, w, key, recs...)
				for _, r := range recs {
					r.Release()
				}
				model.apply(all, meta)
				want := model.sorted()
				sameRows(t, fmt.Sprintf("round %d, our reader", round), tableRows(t, cfg, changelogCols), want)
				sameRows(t, fmt.Sprintf("round %d, DuckDB", round), duckRows(t, db, cfg, changelogCols), want)
			}
			if len(model.rows) == 0 {
				t.Fatal("the model ended empty: the test exercised nothing")
			}
			marked := 0
			for _, a := range snapshot(t, cfg).Files() {
				if a.DeletionVector != nil {
					marked++
				}
			}
			if tc.dvs != (marked > 0) {
				t.Errorf("%d live files carry a deletion vector, want some exactly when deletion_vectors is on (%v)", marked, tc.dvs)
			}
		})
	}
}
