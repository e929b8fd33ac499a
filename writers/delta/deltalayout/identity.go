package deltalayout

import (
	"math/big"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// Identity columns (GENERATED ALWAYS / BY DEFAULT AS IDENTITY): rows that
// do not carry a value (the column missing, or null) get the next values
// after the column's high-water mark, assigned as the rows are written.
// The values a key used travel in its descriptor (IdentityRange); its
// commit checks that no other writer handed them out: they lie beyond the
// table's high-water mark at that version, or every advance of the mark
// since the one they were taken after was made by commits of values of
// this allocator (whose values never repeat: keys commit in any order).
// Each allocator (one per Writer instance, so a restarted process gets a
// new one) has a random nonce, stored in the ranges it hands out and
// recorded with each advance a commit makes: a descriptor another
// server's (or an earlier process's) allocator filled is never taken for
// this one's. It advances the mark in its metaData. Commits that change
// metaData conflict with each other, so two writers that took the same
// values cannot both commit: the loser fails (Aborted) and its
// transaction is replayed with fresh values. The descriptors of one
// commit must carry values of one allocator (one server): two servers
// filling from the same mark would collide on every replay.

// IdentityRange is the values one key generated for an identity column,
// First to Last in the column's step direction, after the table's
// high-water mark Base, by the allocator Nonce.
type IdentityRange struct {
	First int64  `json:"first"`
	Last  int64  `json:"last"`
	Base  int64  `json:"base"`
	Nonce string `json:"nonce"`
}

// IdentityAllocator hands out identity values per column, continuing from
// the table's high-water mark or the last value this writer handed out,
// whichever is further, so that concurrent keys of one server never share
// a value.
type IdentityAllocator struct {
	mu    sync.Mutex
	nonce string // random, set on first use: tells this allocator's values
	last  map[string]int64
	// advanced maps, per column, each high-water mark this writer's
	// commits set to the one they advanced it from and the nonce of the
	// values that did.
	advanced map[string]map[int64]advanceBy
}

// advanceBy is one advance of a high-water mark: from where, by whose
// values.
type advanceBy struct {
	from  int64
	nonce string
}

// id returns the allocator's nonce; a.mu is held.
func (a *IdentityAllocator) id() string {
	if a.nonce == "" {
		a.nonce = uuid.NewString()
	}
	return a.nonce
}

// maxAdvances bounds the chain ownsSince walks.
const maxAdvances = 1 << 16

// Record notes that a commit of this writer advanced col's mark from to
// with values of the allocator nonce.
func (a *IdentityAllocator) Record(col string, from, to int64, nonce string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.advanced == nil {
		a.advanced = map[string]map[int64]advanceBy{}
	}
	if a.advanced[col] == nil || len(a.advanced[col]) >= maxAdvances {
		a.advanced[col] = map[int64]advanceBy{} // forget: later commits conflict conservatively
	}
	a.advanced[col][to] = advanceBy{from, nonce}
}

// OwnsSince reports whether r's values are this allocator's and every
// advance of col's mark from r.Base to h was made by commits of this
// allocator's values: then no other allocator handed out r's values.
func (a *IdentityAllocator) OwnsSince(col string, r IdentityRange, h int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.Nonce != a.id() {
		return false
	}
	for range maxAdvances {
		if h == r.Base {
			return true
		}
		adv, ok := a.advanced[col][h]
		if !ok || adv.nonce != r.Nonce {
			return false
		}
		h = adv.from
	}
	return false
}

// take returns the first of n values of col after id's high-water mark and
// what this allocator handed out; the last is first+(n-1)*step.
func (a *IdentityAllocator) take(col string, id deltalog.Identity, n int) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.id()
	last := id.Last()
	if prev, ok := a.last[col]; ok && (id.Step > 0 && prev > last || id.Step < 0 && prev < last) {
		last = prev
	}
	first, end, ok := advance(last, id.Step, int64(n))
	if !ok {
		return 0, writers.Errorf(writers.ErrInvalid, "delta: identity column %q: %d more values after %d overflow a long", col, n, last)
	}
	if a.last == nil {
		a.last = map[string]int64{}
	}
	a.last[col] = end
	return first, nil
}

// nonceOf returns the allocator's nonce.
func (a *IdentityAllocator) nonceOf() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.id()
}

// advance returns last+step and last+n*step, false when they overflow a
// long.
func advance(last, step, n int64) (first, end int64, ok bool) {
	e := new(big.Int).Mul(big.NewInt(step), big.NewInt(n))
	e.Add(e, big.NewInt(last))
	if !e.IsInt64() || n < 1 {
		return 0, 0, false
	}
	return last + step, e.Int64(), true
}

// IdentityFill fills the identity columns of the rows one key writes and
// records the values it used.
type IdentityFill struct {
	cols   []deltalog.StructField // the table's identity columns
	ids    []deltalog.Identity
	Ranges map[string]IdentityRange
}

// NewIdentityFill returns the filler for table's identity columns, nil
// when it has none.
func NewIdentityFill(table *deltalog.Schema) (*IdentityFill, error) {
	var f *IdentityFill
	for _, c := range table.Fields {
		id, ok, err := c.Identity()
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if f == nil {
			f = &IdentityFill{Ranges: map[string]IdentityRange{}}
		}
		f.cols, f.ids = append(f.cols, c), append(f.ids, id)
	}
	return f, nil
}

// nullableInput reports whether input may lack table column t or carry
// nulls in it: a nullable column, or an identity column (its nulls are
// filled before the rows are written, so a NOT NULL one holds none).
func nullableInput(t deltalog.StructField) bool {
	_, ok, _ := t.Identity()
	return t.Nullable || ok
}

// CheckIdentityInput refuses a stream carrying a GENERATED ALWAYS identity
// column of table: its values are the table's to assign.
func CheckIdentityInput(table *deltalog.Schema, in *arrow.Schema) error {
	for _, f := range table.Fields {
		id, ok, err := f.Identity()
		if err != nil {
			return err
		}
		if ok && !id.AllowExplicit && in.HasField(f.Name) {
			return writers.Errorf(writers.ErrInvalid, "delta: column %q is GENERATED ALWAYS AS IDENTITY: the table assigns its values; drop it from the stream", f.Name)
		}
	}
	return nil
}

// Fill returns rec (every identity column present, as nulls where rows
// carry no value) with the nulls of its identity columns replaced by
// fresh values from alloc. The caller releases the result.
func (f *IdentityFill) Fill(alloc *IdentityAllocator, mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if f == nil {
		rec.Retain()
		return rec, nil
	}
	cols := slices.Clone(rec.Columns())
	var built []arrow.Array
	defer func() {
		for _, c := range built {
			c.Release()
		}
	}()
	for i, c := range f.cols {
		idx := rec.Schema().FieldIndices(c.Name)
		if len(idx) != 1 {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: identity column %q is missing from the rows", c.Name)
		}
		col, ok := cols[idx[0]].(*array.Int64)
		if !ok {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: identity column %q has type %s, want int64", c.Name, cols[idx[0]].DataType())
		}
		nulls := col.NullN()
		if nulls == 0 {
			continue
		}
		next, err := alloc.take(c.Name, f.ids[i], nulls)
		if err != nil {
			return nil, err
		}
		first := next
		b := array.NewInt64Builder(mem)
		b.Reserve(col.Len())
		for r := range col.Len() {
			if col.IsNull(r) {
				b.Append(next)
				next += f.ids[i].Step
			} else {
				b.Append(col.Value(r))
			}
		}
		filled := b.NewInt64Array()
		b.Release()
		built = append(built, filled)
		cols[idx[0]] = filled
		last := next - f.ids[i].Step
		base := f.ids[i].Last()
		if r, ok := f.Ranges[c.Name]; ok {
			first, base = r.First, r.Base
		}
		f.Ranges[c.Name] = IdentityRange{First: first, Last: last, Base: base, Nonce: alloc.nonceOf()}
	}
	fields := slices.Clone(rec.Schema().Fields())
	for _, c := range f.cols {
		fields[rec.Schema().FieldIndices(c.Name)[0]].Type = arrow.PrimitiveTypes.Int64
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), nil
}
