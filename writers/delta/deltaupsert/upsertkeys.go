package deltaupsert

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// KeyColumns splits merge_keys: partition columns live in add
// partitionValues, not in the data files, so they select files; data
// columns are read from the files and matched row by row.
type KeyColumns struct {
	part []string // merge keys that are partition columns, merge_keys order
	Data []string // the other merge keys, merge_keys order (never empty)
}

// NewKeyColumns splits mergeKeys by the table's partition columns
// partitionBy.
func NewKeyColumns(mergeKeys, partitionBy []string) KeyColumns {
	var k KeyColumns
	for _, c := range mergeKeys {
		if slices.Contains(partitionBy, c) {
			k.part = append(k.part, c)
		} else {
			k.Data = append(k.Data, c)
		}
	}
	return k
}

// KeyGroup is the source keys (live or deleted) of one combination of
// partition key values: the encoded data keys, and their bounds per data
// key column for pruning by file statistics. Once built it is read-only
// and safe for concurrent use.
type KeyGroup struct {
	set    *merge.KeySet
	match  *merge.KeyMatcher // over set, once every key is in
	bounds []keyBounds       // per data key column
}

// KeyGroups indexes the source keys of a collapse by partition key values
// (partTuple); enc encodes the data keys.
type KeyGroups struct {
	Keys KeyColumns
	// partTypes are the table's types of keys.part, to read a file's
	// partition values as the source's are spelled (canonicalPartition).
	partTypes []deltalog.DataType
	// partKeys and StatKeys are the physical names of keys.part and
	// keys.data (column mapping): partitionValues and stats use them.
	partKeys, StatKeys []string
	Enc                *merge.KeyEncoder // over the source's data key columns
	groups             map[string]*KeyGroup
	sizeHint           int // source keys: one group's size when the keys have no partition column
	// live locates the key of each live row (res.Live's batches, in
	// order) in the groups, for KeptColumns.fill.
	live []liveKeys
}

// liveKeys locates the keys of one batch of live rows: row i's key is
// ordinal ords[i] of group grps[i] (of the one group when grps is nil:
// the keys have no partition column).
type liveKeys struct {
	ords []int32
	grps []*KeyGroup
}

// NewKeyGroups indexes the keys of res: the key columns of its live rows
// and its deleted keys. Every target row with one of them is replaced or
// deleted. cols is the table's column mapping (nil without).
func NewKeyGroups(res *merge.Result, keys KeyColumns, table *deltalog.Schema, cols *deltalayout.ColumnMap) (*KeyGroups, error) {
	g := &KeyGroups{Keys: keys, groups: make(map[string]*KeyGroup), sizeHint: int(res.LiveRows + res.DeletedRows),
		partKeys: cols.PhysicalNames(keys.part), StatKeys: cols.PhysicalNames(keys.Data)}
	for _, c := range keys.part {
		f, ok := table.Field(c)
		if !ok {
			return nil, fmt.Errorf("partition key %q is not a column of the table", c)
		}
		g.partTypes = append(g.partTypes, f.Type)
	}
	for _, rec := range res.Live {
		live, err := g.add(rec, true)
		if err != nil {
			return nil, err
		}
		g.live = append(g.live, live)
	}
	for _, rec := range res.Deleted {
		if _, err := g.add(rec, false); err != nil {
			return nil, err
		}
	}
	for _, grp := range g.groups {
		grp.match = merge.NewKeyMatcher(grp.set)
	}
	if g.Enc == nil {
		var err error
		if g.Enc, err = merge.NewKeyEncoder(res.KeySchema, keys.Data); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// add indexes the keys of rec, which holds every key column, and returns
// where they are when located.
func (g *KeyGroups) add(rec arrow.RecordBatch, locate bool) (liveKeys, error) {
	var at liveKeys
	enc, err := merge.NewKeyEncoder(rec.Schema(), g.Keys.Data)
	if err != nil {
		return at, err
	}
	g.Enc = enc
	n := int(rec.NumRows())
	dataCols := namedColumns(rec, g.Keys.Data)
	if err := enc.EncodeColumns(dataCols, n); err != nil {
		return at, err
	}
	partCols := namedColumns(rec, g.Keys.part)
	if locate {
		at.ords = make([]int32, 0, n)
		if len(partCols) > 0 {
			at.grps = make([]*KeyGroup, 0, n)
		}
	}
	vals := make([]*string, len(partCols))
	for row := range n {
		for i, col := range partCols {
			v, err := deltalayout.PartitionValue(col, row)
			if err != nil {
				return at, err
			}
			vals[i] = v
		}
		tuple := partTuple(vals)
		grp := g.groups[tuple]
		if grp == nil {
			hint := g.sizeHint
			if len(partCols) > 0 {
				hint = 0 // the rows spread over partitions
			}
			grp = &KeyGroup{set: merge.NewKeySet(hint), bounds: make([]keyBounds, len(dataCols))}
			g.groups[tuple] = grp
		}
		ord, _ := grp.set.Add(enc.Key(row))
		if ord > math.MaxInt32 {
			// Matches keep ordinals as int32 (FileMatches, KeptColumns);
			// a KeySet holds up to 2^32-2.
			return at, writers.Errorf(writers.ErrExhausted, "delta: upsert: more than %d distinct keys in one partition; commit smaller transactions", math.MaxInt32)
		}
		if locate {
			at.ords = append(at.ords, int32(ord))
			if at.grps != nil {
				at.grps = append(at.grps, grp)
			}
		}
		for i, col := range dataCols {
			grp.bounds[i].add(col, row)
		}
	}
	return at, nil
}

// forFile returns the group of a's partition key values, nil when the
// source has no key there.
func (g *KeyGroups) ForFile(a *deltalog.Add) *KeyGroup {
	vals := make([]*string, len(g.Keys.part))
	for i, c := range g.partKeys {
		vals[i] = canonicalPartition(a.PartitionValues[c], g.partTypes[i])
	}
	return g.groups[partTuple(vals)]
}

// canonicalPartition spells a file's partition value v of type t as
// PartitionValue spells the source's: other writers (and older Quiver)
// spell some values otherwise — Spark's "2024-01-01 10:00:00" timestamps,
// Go's "+Inf" — and a key compared as spelled would be missed and
// inserted twice. "" is null, as Delta reads it; a value that does not
// parse is compared as it is.
func canonicalPartition(v *string, t deltalog.DataType) *string {
	if v == nil || *v == "" {
		return nil
	}
	parsed, err := deltalayout.ParsePartitionValue(v, t)
	if err != nil {
		return v
	}
	if f, ok := parsed.(float64); ok && t.Name == "float" {
		parsed = float32(f) // spelled as Float.toString, like a float32 column's
	}
	canon, err := deltalayout.FormatPartitionValue(parsed)
	if err != nil || canon == nil {
		return v
	}
	return canon
}

// mayHold reports whether a file with stats st may hold a key of g: false
// only when, for some data key column, the file's min/max range and the
// group's are disjoint. Missing or unparsable stats never prune.
func (grp *KeyGroup) MayHold(st *deltalog.Stats, data []string) bool {
	if st == nil {
		return true
	}
	for i, name := range data {
		lo, okLo := st.Min(name)
		hi, okHi := st.Max(name)
		if okLo && grp.bounds[i].above(lo) || okHi && grp.bounds[i].below(hi) {
			return false
		}
	}
	return true
}

// partTuple encodes partition values (nil = null) as a map key.
func partTuple(vals []*string) string {
	var b strings.Builder
	for _, v := range vals {
		if v == nil {
			b.WriteByte(0)
		} else {
			b.WriteByte(1)
			b.WriteString(*v)
		}
		b.WriteByte(0xff)
	}
	return b.String()
}

// namedColumns returns rec's columns named names, in that order (every
// name must be in rec).
func namedColumns(rec arrow.RecordBatch, names []string) []arrow.Array {
	cols := make([]arrow.Array, len(names))
	for i, n := range names {
		cols[i] = rec.Column(rec.Schema().FieldIndices(n)[0])
	}
	return cols
}

// keyBounds are the smallest and largest source values of one key column,
// kept for integer and string columns (the types whose Delta stats compare
// exactly); other types never prune.
type keyBounds struct {
	kind       boundKind
	minI, maxI int64
	minS, maxS string
}

type boundKind uint8

const (
	boundNone boundKind = iota
	boundInt
	boundString
)

// add widens b by row of col.
func (b *keyBounds) add(col arrow.Array, row int) {
	var (
		i  int64
		s  string
		kd boundKind
	)
	switch c := col.(type) {
	case *array.Int8:
		i, kd = int64(c.Value(row)), boundInt
	case *array.Int16:
		i, kd = int64(c.Value(row)), boundInt
	case *array.Int32:
		i, kd = int64(c.Value(row)), boundInt
	case *array.Int64:
		i, kd = c.Value(row), boundInt
	case *array.String:
		s, kd = c.Value(row), boundString
	case *array.LargeString:
		s, kd = c.Value(row), boundString
	default:
		return
	}
	switch {
	case b.kind == boundNone:
		b.kind, b.minI, b.maxI, b.minS, b.maxS = kd, i, i, s, s
	case kd == boundInt:
		b.minI, b.maxI = min(b.minI, i), max(b.maxI, i)
	default:
		b.minS, b.maxS = min(b.minS, s), max(b.maxS, s)
	}
}

// above reports whether every source value is below a file's min v.
func (b *keyBounds) above(v any) bool {
	switch b.kind {
	case boundInt:
		n, ok := statInt(v)
		return ok && b.maxI < n
	case boundString:
		s, ok := v.(string)
		return ok && b.maxS < s
	}
	return false
}

// below reports whether every source value is above a file's max v.
func (b *keyBounds) below(v any) bool {
	switch b.kind {
	case boundInt:
		n, ok := statInt(v)
		return ok && b.minI > n
	case boundString:
		s, ok := v.(string)
		return ok && b.minS > s
	}
	return false
}

func statInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}
