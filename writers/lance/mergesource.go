package lance

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers/lance/lancefile"
)

// srcRow is one row of a merge source: row of recs[rec], its key ordinal
// in the source key set, and whether it is a changelog delete (_op D).
type srcRow struct {
	rec, row, ord int32
	del           bool
}

// source is a key-encoded merge source. It owns recs (user columns only:
// what a new fragment stores); Release frees them.
type source struct {
	recs   []arrow.RecordBatch
	rows   []srcRow
	keys   *merge.KeySet
	keyCol []int // column of each key in recs' schema
	on     []string
	ords   []int32 // scratch: the ordinals of one batch's keys
}

func (s *source) Release() {
	for _, r := range s.recs {
		r.Release()
	}
	s.recs = nil
}

// isChangelog reports whether a stream carries changelog metadata columns
// (_op or __weight): such a source is collapsed first (see newSource).
func isChangelog(schema *arrow.Schema) bool {
	return schema.HasField(merge.OpColumn) || schema.HasField(merge.WeightColumn)
}

// newSource key-encodes the stream's batches (borrowed) in stream order.
// A plain source keeps every row, duplicates included: source_duplicates
// decides about them. A changelog source is collapsed through merge first
// (the latest row of a key wins, as in every Quiver upsert), so it has no
// duplicates; its deleted keys become rows with del set.
func newSource(recs []arrow.RecordBatch, on []string, mem memory.Allocator) (*source, error) {
	if len(recs) == 0 {
		return &source{keys: merge.NewKeySet(0), on: on}, nil
	}
	if isChangelog(recs[0].Schema()) {
		return collapsedSource(recs, on, mem)
	}
	// At most that many keys: size the set once.
	b, err := newSourceBuilder(recs[0].Schema(), on, int(lancefile.Rows(recs)))
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if err := b.add(rec); err != nil {
			b.src.Release()
			return nil, err
		}
	}
	return b.src, nil
}

// sourceBuilder builds a plain (not changelog) source batch by batch:
// Write feeds it as the stream arrives, so that encoding and hashing the
// source keys overlaps with the transfer instead of waiting for the
// precommit.
type sourceBuilder struct {
	src    *source
	enc    *merge.KeyEncoder
	stream int64 // rows added so far
}

// newSourceBuilder returns a builder for batches of schema, its key set
// sized for about rows keys. The set may owe its hash table
// (merge.NewLazyKeySet): a warm merge looks the source's keys up in the
// key index, never in the source.
func newSourceBuilder(schema *arrow.Schema, on []string, rows int) (*sourceBuilder, error) {
	enc, err := merge.NewKeyEncoder(merge.StripMetadata(schema), on)
	if err != nil {
		return nil, err
	}
	rows = min(rows, merge.MaxSizeHint)
	return &sourceBuilder{enc: enc,
		src: &source{keys: merge.NewLazyKeySet(rows), rows: make([]srcRow, 0, rows), keyCol: enc.Columns(), on: on}}, nil
}

// add appends the rows of rec (borrowed; retained without its metadata
// columns). On error (a null key: a merge.RowError naming its row in the
// stream) nothing of rec is added.
func (b *sourceBuilder) add(rec arrow.RecordBatch) error {
	user := merge.StripMetadataRecord(rec) // without _ts_ms
	err := b.src.add(b.enc, user, false)
	user.Release()
	if err != nil {
		return withStreamRow(err, b.stream)
	}
	b.stream += rec.NumRows()
	return nil
}

// add encodes rec's keys and appends its rows; unless del, rec is
// retained for output. A lone int64 key column without nulls (ids) is
// added as values (KeySet.AddInt64s), with no key encoded per row.
func (s *source) add(enc *merge.KeyEncoder, rec arrow.RecordBatch, del bool) error {
	cols := enc.Columns()
	if ids, ok := rec.Column(cols[0]).(*array.Int64); ok && len(cols) == 1 && ids.NullN() == 0 {
		s.ords = s.keys.AddInt64s(ids.Int64Values(), s.ords[:0])
	} else {
		if err := enc.Encode(rec); err != nil {
			return err
		}
		s.ords = s.ords[:0]
		for i := range enc.Len() {
			ord, _ := s.keys.Add(enc.Key(i))
			s.ords = append(s.ords, int32(ord))
		}
	}
	ri := int32(-1)
	if !del {
		rec.Retain()
		s.recs = append(s.recs, rec)
		ri = int32(len(s.recs) - 1)
	}
	for i, ord := range s.ords {
		s.rows = append(s.rows, srcRow{rec: ri, row: int32(i), ord: ord, del: del})
	}
	return nil
}

func collapsedSource(recs []arrow.RecordBatch, on []string, mem memory.Allocator) (*source, error) {
	c, err := merge.NewCollapser(recs[0].Schema(), merge.Options{Keys: on, Allocator: mem})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for _, rec := range recs {
		if err := c.Add(rec); err != nil {
			return nil, err
		}
	}
	res, err := c.Result()
	if err != nil {
		return nil, err
	}
	defer res.Release()
	live, err := merge.NewKeyEncoder(res.Schema, on)
	if err != nil {
		return nil, err
	}
	dead, err := merge.NewKeyEncoder(res.KeySchema, on)
	if err != nil {
		return nil, err
	}
	s := &source{keys: merge.NewKeySet(res.Keys.Len()), keyCol: live.Columns(), on: on}
	for _, rec := range res.Live {
		if err := s.add(live, rec, false); err != nil {
			s.Release()
			return nil, err
		}
	}
	for _, rec := range res.Deleted {
		if err := s.add(dead, rec, true); err != nil {
			s.Release()
			return nil, err
		}
	}
	return s, nil
}

func withStreamRow(err error, base int64) error {
	if re, ok := err.(*merge.RowError); ok {
		re.StreamRow += base
	}
	return err
}

// keyValues formats the key of r as Lance's errors do: col = value, ...
func (s *source) keyValues(r srcRow) string {
	rec := s.recs[r.rec]
	parts := make([]string, len(s.on))
	for k, col := range s.keyCol {
		parts[k] = fmt.Sprintf("%s = %s", s.on[k], rec.Column(col).ValueStr(int(r.row)))
	}
	return strings.Join(parts, ", ")
}
