package merge

import (
	"errors"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
)

// Options configures a Collapser.
type Options struct {
	// Keys names the key columns, in encoding order. Required.
	Keys []string
	// Allocator allocates the output arrays; nil means
	// memory.DefaultAllocator.
	Allocator memory.Allocator
}

// Collapser collapses a changelog (a whole stream or transaction, batch by
// batch in stream order) to one row per key, following the convention of
// the package comment.
//
// Ownership: Add borrows its batch and Retains it while a row of it may be
// in the output; a batch none of whose rows is referenced any more is
// Released during Add, so a stream rewriting the same keys keeps few
// batches. Result and Close release every batch still held.
//
// Memory: the retained batches, plus per distinct key its encoded bytes
// (8 per integer key column, uvarint length + bytes per string column),
// about 14 bytes of hash slot, 16 bytes of state (batch, row, weight) and,
// when key lengths vary, 8 bytes of offset: about 38 bytes for an int64
// key. See MemoryBytes and KeySet.
//
// A Collapser is not safe for concurrent use.
type Collapser struct {
	mem       memory.Allocator
	schema    *arrow.Schema
	enc       *KeyEncoder
	opCol     int // -1 when the schema has no _op
	weightCol int // -1 when the schema has no __weight
	set       *KeySet
	state     []keyState // by key ordinal
	batches   []arrow.RecordBatch
	refs      []int32 // keys whose state points into each batch; 0 = released
	ops       opDecoder
	rowsIn    int64
	done      bool
}

// keyState is a key's latest decisive row and its weight: without
// __weight, 1 for an upsert and 0 for a delete (the last row wins); with
// __weight, the net weight, and the row is the latest positive-weight row
// (or the first row while none was positive).
type keyState struct {
	batch  uint32
	row    uint32
	weight int64
}

// NewCollapser returns a Collapser for batches of schema. It checks the
// keys (see NewKeyEncoder) and the types of _op and __weight (int64);
// errors wrap writers.ErrInvalid.
func NewCollapser(schema *arrow.Schema, opts Options) (*Collapser, error) {
	enc, err := NewKeyEncoder(schema, opts.Keys)
	if err != nil {
		return nil, err
	}
	c := &Collapser{mem: opts.Allocator, schema: schema, enc: enc, opCol: -1, weightCol: -1, set: NewKeySet(0)}
	if c.mem == nil {
		c.mem = memory.DefaultAllocator
	}
	if idx := schema.FieldIndices(OpColumn); len(idx) > 0 {
		if err := checkOpType(schema.Field(idx[0]).Type); err != nil {
			return nil, err
		}
		c.opCol = idx[0]
	}
	if idx := schema.FieldIndices(WeightColumn); len(idx) > 0 {
		if t := schema.Field(idx[0]).Type; t.ID() != arrow.INT64 {
			return nil, writers.Errorf(writers.ErrInvalid, "merge: column %q has type %s; send it as int64", WeightColumn, t)
		}
		c.weightCol = idx[0]
	}
	return c, nil
}

// Add folds rec, the next batch of the stream, into the collapse. rec is
// borrowed (retained when kept, see Collapser). A bad row (unknown _op, null
// __weight, null key) is a *RowError with its stream row; rec is then not
// applied and the Collapser stays usable. A batch whose schema differs from
// the Collapser's wraps writers.ErrInvalid; Add after Result or Close wraps
// writers.ErrWrongState.
func (c *Collapser) Add(rec arrow.RecordBatch) error {
	if c.done {
		return writers.Errorf(writers.ErrWrongState, "merge: Add after Result or Close; start a new Collapser")
	}
	if !sameLayout(rec.Schema(), c.schema) {
		return writers.Errorf(writers.ErrInvalid, "merge: batch schema %s differs from the stream's %s; send one schema per stream", rec.Schema(), c.schema)
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	if n > math.MaxInt32 || len(c.batches) >= math.MaxUint32 || c.set.Len()+n > maxKeys {
		return writers.Errorf(writers.ErrExhausted, "merge: changelog too large to collapse at once (%d batches, %d keys); commit smaller transactions", len(c.batches), c.set.Len())
	}
	if err := c.validate(rec); err != nil {
		var re *RowError
		if errors.As(err, &re) {
			re.StreamRow += c.rowsIn
		}
		return err
	}
	c.apply(rec)
	c.rowsIn += int64(n)
	return nil
}

// validate encodes rec's keys and decodes its ops, leaving them in c.enc
// and c.ops, and checks weights, before anything is applied.
func (c *Collapser) validate(rec arrow.RecordBatch) error {
	if err := c.enc.Encode(rec); err != nil {
		return err
	}
	if c.opCol >= 0 {
		if err := c.ops.decode(rec.Column(c.opCol)); err != nil {
			return err
		}
	}
	if c.weightCol >= 0 {
		if w := rec.Column(c.weightCol); w.NullN() > 0 {
			for i := range w.Len() {
				if w.IsNull(i) {
					return &RowError{Row: i, StreamRow: int64(i), Column: WeightColumn,
						Reason: "weight is null; send +1 for an insert and -1 for a retraction"}
				}
			}
		}
	}
	return nil
}

// apply folds the validated batch rec into the key states.
func (c *Collapser) apply(rec arrow.RecordBatch) {
	b := uint32(len(c.batches))
	rec.Retain()
	c.batches = append(c.batches, rec)
	c.refs = append(c.refs, 0)
	var weights []int64
	if c.weightCol >= 0 {
		weights = rec.Column(c.weightCol).(interface{ Int64Values() []int64 }).Int64Values()
	}
	for i := range c.enc.Len() {
		var w int64 = 1
		switch {
		case weights != nil:
			w = weights[i]
		case c.opCol >= 0 && c.ops.ops[i] == opDelete:
			w = 0
		}
		ord, added := c.set.Add(c.enc.Key(i))
		if added {
			c.state = append(c.state, keyState{batch: b, row: uint32(i), weight: w})
			c.refs[b]++
			continue
		}
		st := &c.state[ord]
		if weights == nil {
			st.weight = w
		} else {
			st.weight += w
			if w <= 0 {
				continue // the latest positive row stays the candidate
			}
		}
		c.move(st, b, uint32(i))
	}
	if c.refs[b] == 0 {
		c.release(b)
	}
}

// move points st at row of batch b, releasing the batch it leaves when no
// other key points into it.
func (c *Collapser) move(st *keyState, b, row uint32) {
	if st.batch != b {
		old := st.batch
		if c.refs[old]--; c.refs[old] == 0 {
			c.release(old)
		}
		c.refs[b]++
		st.batch = b
	}
	st.row = row
}

func (c *Collapser) release(b uint32) {
	c.batches[b].Release()
	c.batches[b] = nil
}

// MemoryBytes returns the bytes of the key index and key states (capacity),
// excluding the retained batches, which callers account by their own size.
func (c *Collapser) MemoryBytes() int {
	return c.set.MemoryBytes() + 16*cap(c.state) + 8*cap(c.batches) + 4*cap(c.refs)
}

// RowsIn returns the rows added so far.
func (c *Collapser) RowsIn() int64 { return c.rowsIn }

// Close releases every batch still held. It is idempotent, and a no-op
// after Result.
func (c *Collapser) Close() {
	if c.done {
		return
	}
	c.done = true
	for b, rec := range c.batches {
		if rec != nil {
			c.release(uint32(b))
		}
	}
	c.batches = nil
}

// Collapse collapses the single changelog batch rec (borrowed). The Result
// is owned by the caller, who must Release it.
func Collapse(rec arrow.RecordBatch, opts Options) (*Result, error) {
	c, err := NewCollapser(rec.Schema(), opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Add(rec); err != nil {
		return nil, err
	}
	return c.Result()
}

// sameLayout reports whether two schemas have the same column names and
// types in the same order (nullability and metadata may differ).
func sameLayout(a, b *arrow.Schema) bool {
	if a == b {
		return true
	}
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}
