package merge

import (
	"context"
	"errors"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// Result is a collapsed changelog: one entry per distinct key. Rows appear
// in the stream order of the row that decided them (the last row, or with
// __weight the latest positive row), so a Result is deterministic for a
// given input. A Result owns its records; call Release once when done.
type Result struct {
	// Schema is the input schema without metadata columns (StripMetadata).
	Schema *arrow.Schema
	// Live holds the rows of the live keys (upserts), with Schema.
	Live []arrow.RecordBatch
	// KeySchema holds the key columns, in key order.
	KeySchema *arrow.Schema
	// Deleted holds the key columns of the deleted keys, with KeySchema.
	Deleted []arrow.RecordBatch
	// Keys holds every distinct key, live or deleted, as encoded by a
	// KeyEncoder over the same key types (ordinals in first-seen order).
	Keys *KeySet
	// RowsIn, LiveRows and DeletedRows count the input rows, the rows of
	// Live and the rows of Deleted.
	RowsIn, LiveRows, DeletedRows int64
}

// Release releases the records of r. It is idempotent.
func (r *Result) Release() {
	for _, recs := range [][]arrow.RecordBatch{r.Live, r.Deleted} {
		for _, rec := range recs {
			rec.Release()
		}
	}
	r.Live, r.Deleted = nil, nil
}

// Result returns the collapse of every batch added and releases the
// batches the Collapser held: it ends the Collapser (later calls wrap
// writers.ErrWrongState). The Result is owned by the caller.
func (c *Collapser) Result() (*Result, error) {
	if c.done {
		return nil, writers.Errorf(writers.ErrWrongState, "merge: Result after Result or Close; start a new Collapser")
	}
	defer c.Close()
	keyFields := make([]arrow.Field, len(c.enc.cols))
	for k, col := range c.enc.cols {
		keyFields[k] = c.schema.Field(col)
	}
	r := &Result{
		Schema:    StripMetadata(c.schema),
		KeySchema: arrow.NewSchema(keyFields, nil),
		Keys:      c.set,
		RowsIn:    c.rowsIn,
	}
	ctx := compute.WithAllocator(context.Background(), c.mem)
	userCols := userColumns(c.schema)
	for b, rows := range c.rowsByBatch() {
		if c.batches[b] == nil {
			continue
		}
		if len(rows.live) > 0 {
			if err := r.take(ctx, &r.Live, c.batches[b], userCols, r.Schema, rows.live); err != nil {
				r.Release()
				return nil, err
			}
			r.LiveRows += int64(len(rows.live))
		}
		if len(rows.deleted) > 0 {
			if err := r.take(ctx, &r.Deleted, c.batches[b], c.enc.cols, r.KeySchema, rows.deleted); err != nil {
				r.Release()
				return nil, err
			}
			r.DeletedRows += int64(len(rows.deleted))
		}
		// Free each batch as soon as it has been taken from, to lower the
		// peak while the output is built.
		c.release(uint32(b))
	}
	return r, nil
}

// take appends to dst the rows idx (ascending) of rec's columns cols, as a
// record of schema.
func (r *Result) take(ctx context.Context, dst *[]arrow.RecordBatch, rec arrow.RecordBatch, cols []int, schema *arrow.Schema, idx []int32) error {
	// The indices live in Go memory: a take copies the rows and keeps no
	// reference to them.
	indices := array.NewInt32Data(array.NewData(arrow.PrimitiveTypes.Int32, len(idx),
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(idx))}, nil, 0, 0))
	defer indices.Release()
	out := make([]arrow.Array, len(cols))
	defer func() {
		for _, a := range out {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, col := range cols {
		var err error
		out[i], err = takeColumn(ctx, rec.Column(col), indices, idx)
		if err != nil {
			return writers.Errorf(writers.ErrInvalid, "merge: take rows of column %q of the collapsed changelog: %w", schema.Field(i).Name, err)
		}
	}
	*dst = append(*dst, array.NewRecordBatch(schema, out, int64(len(idx))))
	return nil
}

// takeColumn returns the rows idx of col. compute's take has no kernel for
// some types (string_view, binary_view); those are copied run by run of
// consecutive indices through array.Concatenate instead.
func takeColumn(ctx context.Context, col, indices arrow.Array, idx []int32) (arrow.Array, error) {
	out, err := compute.TakeArrayOpts(ctx, col, indices, compute.TakeOptions{BoundsCheck: false})
	if !errors.Is(err, arrow.ErrNotImplemented) {
		return out, err
	}
	var runs []arrow.Array
	defer func() {
		for _, a := range runs {
			a.Release()
		}
	}()
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && idx[j] == idx[j-1]+1 {
			j++
		}
		runs = append(runs, array.NewSlice(col, int64(idx[i]), int64(idx[j-1])+1))
		i = j
	}
	return array.Concatenate(runs, compute.GetAllocator(ctx))
}

// batchRows are the ascending rows of one batch that decide a live or a
// deleted key.
type batchRows struct {
	live, deleted []int32
}

// rowsByBatch groups the deciding row of every key by batch (indexed like
// c.batches), rows ascending within a batch. It sorts by bucketing keys per batch (the batch's
// reference count sizes its bucket) and then walking a bitmap of the
// batch's rows, so it costs O(keys + retained rows/64), no comparison sort.
func (c *Collapser) rowsByBatch() []batchRows {
	start := make([]int, len(c.refs)+1)
	for b, n := range c.refs {
		start[b+1] = start[b] + int(n)
	}
	// bucket holds row<<1 | deleted, grouped by batch.
	bucket := make([]uint32, len(c.state))
	fill := append([]int(nil), start[:len(c.refs)]...)
	for _, st := range c.state {
		v := st.row << 1
		if st.weight <= 0 {
			v |= 1
		}
		bucket[fill[st.batch]] = v
		fill[st.batch]++
	}
	out := make([]batchRows, len(c.batches))
	var live, deleted []uint64 // bitmaps, reused across batches
	for b, rec := range c.batches {
		if rec == nil {
			continue
		}
		words := (int(rec.NumRows()) + 63) / 64
		live, deleted = resize(live, words), resize(deleted, words)
		clear(live)
		clear(deleted)
		for _, v := range bucket[start[b]:start[b+1]] {
			row := v >> 1
			if v&1 == 0 {
				live[row/64] |= 1 << (row % 64)
			} else {
				deleted[row/64] |= 1 << (row % 64)
			}
		}
		out[b] = batchRows{live: setBits(live), deleted: setBits(deleted)}
	}
	return out
}

// setBits returns the indices of the set bits of bitmap, ascending.
func setBits(bitmap []uint64) []int32 {
	n := 0
	for _, w := range bitmap {
		n += bits.OnesCount64(w)
	}
	if n == 0 {
		return nil
	}
	idx := make([]int32, 0, n)
	for i, w := range bitmap {
		for w != 0 {
			idx = append(idx, int32(i*64+bits.TrailingZeros64(w)))
			w &= w - 1
		}
	}
	return idx
}
