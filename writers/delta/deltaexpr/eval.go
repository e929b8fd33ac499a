package deltaexpr

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// Three-valued results, one byte per row.
const (
	triFalse uint8 = iota
	triTrue
	triNull
)

// predicate evaluates a condition over every row of a record into out
// (len(out) rows), with scratch buffers from sc.
type predicate interface {
	eval(rec arrow.RecordBatch, out []uint8, sc *scratch)
}

// scratch recycles result buffers within one evaluation (at most one per
// nesting level is live) and holds the results of shared operands.
type scratch struct {
	free   [][]uint8
	shared map[*sharedPred][]uint8
	evals  int // predicates evaluated, a measure of the work
}

// run evaluates p into out.
func (sc *scratch) run(p predicate, rec arrow.RecordBatch, out []uint8) {
	sc.evals++
	p.eval(rec, out, sc)
}

// sharedPred is a condition several comparisons read (the operand of
// BETWEEN or IN): evaluated once per evaluation, its result reused.
type sharedPred struct{ p predicate }

func (p *sharedPred) eval(rec arrow.RecordBatch, out []uint8, sc *scratch) {
	if res, ok := sc.shared[p]; ok {
		copy(out, res)
		return
	}
	sc.run(p.p, rec, out)
	if sc.shared == nil {
		sc.shared = map[*sharedPred][]uint8{}
	}
	sc.shared[p] = append([]uint8(nil), out...)
}

func (sc *scratch) get(n int) []uint8 {
	if k := len(sc.free); k > 0 {
		b := sc.free[k-1]
		sc.free = sc.free[:k-1]
		return b[:n]
	}
	return make([]uint8, n)
}

func (sc *scratch) put(b []uint8) { sc.free = append(sc.free, b) }

// FirstViolation evaluates b over rec and returns the first row for which
// it is not TRUE (FALSE or NULL), if any. rec must have the schema b was
// bound to.
func (b *Bound) FirstViolation(rec arrow.RecordBatch) (row int, found bool) {
	n := int(rec.NumRows())
	if n == 0 {
		return 0, false
	}
	var sc scratch
	out := b.eval(rec, &sc)
	for i, v := range out {
		if v != triTrue {
			return i, true
		}
	}
	return 0, false
}

// eval evaluates b over every row of rec.
func (b *Bound) eval(rec arrow.RecordBatch, sc *scratch) []uint8 {
	out := sc.get(int(rec.NumRows()))
	sc.run(b.root, rec, out)
	return out
}

// maxValueChars bounds each value RowValues prints.
const maxValueChars = 64

// RowValues renders the values row of rec holds in the columns b refers
// to, as "a=1, b.c=NULL", each value cut to 64 characters.
func (b *Bound) RowValues(rec arrow.RecordBatch, row int) string {
	parts := make([]string, len(b.cols))
	for i, c := range b.cols {
		leaf, valid := c.resolve(rec)
		v := "NULL"
		if valid(row) {
			v = leaf.ValueStr(row)
			if d, ok := leaf.(*array.Decimal128); ok { // ValueStr drops the scale
				v = d.Value(row).ToString(d.DataType().(*arrow.Decimal128Type).Scale)
			}
			v = clipChars(v, maxValueChars)
		}
		parts[i] = c.name + "=" + v
	}
	return strings.Join(parts, ", ")
}

// clipChars cuts s to n characters, reading no further than them.
func clipChars(s string, n int) string {
	at := 0
	for range n {
		if at == len(s) {
			return s
		}
		_, size := utf8.DecodeRuneInString(s[at:])
		at += size
	}
	if at == len(s) {
		return s
	}
	return s[:at] + "…"
}

// resolve returns the column's array in rec and its validity, which for
// a nested field includes its parents'.
func (c *colRef) resolve(rec arrow.RecordBatch) (arrow.Array, func(int) bool) {
	arr := rec.Column(c.idx[0])
	var parents []arrow.Array
	for _, i := range c.idx[1:] {
		parents = append(parents, arr)
		arr = arr.(*array.Struct).Field(i)
	}
	leaf := arr
	if len(parents) == 0 {
		return leaf, leaf.IsValid
	}
	return leaf, func(i int) bool {
		for _, p := range parents {
			if p.IsNull(i) {
				return false
			}
		}
		return leaf.IsValid(i)
	}
}

type constPred uint8

func (c constPred) eval(_ arrow.RecordBatch, out []uint8, _ *scratch) {
	for i := range out {
		out[i] = uint8(c)
	}
}

type logicPred struct {
	or   bool
	args []predicate
}

func (p *logicPred) eval(rec arrow.RecordBatch, out []uint8, sc *scratch) {
	sc.run(p.args[0], rec, out)
	tmp := sc.get(len(out))
	defer sc.put(tmp)
	// AND: FALSE wins, then NULL; OR: TRUE wins, then NULL.
	win := triFalse
	if p.or {
		win = triTrue
	}
	for _, a := range p.args[1:] {
		sc.run(a, rec, tmp)
		for i, v := range tmp {
			switch o := out[i]; {
			case o == win:
			case v == win:
				out[i] = win
			case v == triNull:
				out[i] = triNull
			}
		}
	}
}

type notPred struct{ arg predicate }

func (p *notPred) eval(rec arrow.RecordBatch, out []uint8, sc *scratch) {
	sc.run(p.arg, rec, out)
	for i, v := range out {
		if v != triNull {
			out[i] = 1 - v
		}
	}
}

type isNullPred struct {
	v   operand
	not bool
}

func (p *isNullPred) eval(rec arrow.RecordBatch, out []uint8, sc *scratch) {
	yes, no := triTrue, triFalse
	if p.not {
		yes, no = no, yes
	}
	valid, release := p.v.validity(rec, len(out), sc)
	defer release()
	for i := range out {
		out[i] = yes
		if valid(i) {
			out[i] = no
		}
	}
}

// boolPred is a boolean column or literal used as a condition.
type boolPred struct{ v operand }

func (p *boolPred) eval(rec arrow.RecordBatch, out []uint8, sc *scratch) {
	get, release := p.v.ints(rec, len(out), sc)
	defer release()
	for i := range out {
		v, ok := get(i)
		out[i] = triNull
		if ok {
			out[i] = uint8(v)
		}
	}
}

type cmpPred struct {
	op       uint8 // opMask
	nullSafe bool  // <=>: NULL <=> NULL is TRUE, NULL <=> x FALSE
	dom      domain
	l, r     operand
}

func (p *cmpPred) eval(rec arrow.RecordBatch, out []uint8, sc *scratch) {
	if p.evalColumnLiteral(rec, out) {
		return
	}
	n := len(out)
	switch p.dom.kind {
	case dInt:
		l, lr := p.l.ints(rec, n, sc)
		r, rr := p.r.ints(rec, n, sc)
		defer lr()
		defer rr()
		compareInto(out, l, r, cmpOrdered[int64], p.op, p.nullSafe)
	case dFloat:
		l, lr := p.l.floats(rec, n, sc, p.dom.f32)
		r, rr := p.r.floats(rec, n, sc, p.dom.f32)
		defer lr()
		defer rr()
		compareInto(out, l, r, cmpFloat, p.op, p.nullSafe)
	case dDecimal:
		l := p.l.decimals(rec, p.dom.scale)
		r := p.r.decimals(rec, p.dom.scale)
		compareInto(out, l, r, decimal128.Num.Cmp, p.op, p.nullSafe)
	case dString:
		compareInto(out, p.l.strings(rec), p.r.strings(rec), strings.Compare, p.op, p.nullSafe)
	}
}

// evalColumnLiteral is eval's fast path for the commonest shape, a
// top-level long, int, double or string column compared with a literal
// of its domain: one loop over the values, no call per row. It reports
// whether it applied.
func (p *cmpPred) evalColumnLiteral(rec arrow.RecordBatch, out []uint8) bool {
	col, lit, mask := p.l, p.r, p.op
	if col.col == nil {
		// literal op column: the mirrored comparison (less <-> greater).
		col, lit, mask = p.r, p.l, mask&2|mask>>2&1|mask&1<<2
	}
	if p.nullSafe || col.col == nil || len(col.col.idx) != 1 || lit.col != nil || lit.pred != nil || col.dateMicros {
		return false
	}
	var li int64 // an integer-domain literal's value (a date's midnight in µs as ints reads it)
	if p.dom.kind == dInt {
		get, _ := lit.ints(rec, 0, nil)
		li, _ = get(0)
	}
	arr := rec.Column(col.col.idx[0])
	switch a := arr.(type) {
	case *array.Int64:
		if p.dom.kind != dInt {
			return false
		}
		compareValues(out, a, a.Int64Values(), li, cmpOrdered[int64], mask)
	case *array.Int32:
		if p.dom.kind != dInt {
			return false
		}
		compareValues(out, a, a.Int32Values(), li, func(v int32, l int64) int { return cmpOrdered(int64(v), l) }, mask)
	case *array.Timestamp:
		if p.dom.kind != dInt || a.DataType().(*arrow.TimestampType).Unit != arrow.Microsecond {
			return false
		}
		compareValues(out, a, a.TimestampValues(), li, func(v arrow.Timestamp, l int64) int { return cmpOrdered(int64(v), l) }, mask)
	case *array.Date32:
		if p.dom.kind != dInt {
			return false
		}
		compareValues(out, a, a.Date32Values(), li, func(v arrow.Date32, l int64) int { return cmpOrdered(int64(v), l) }, mask)
	case *array.Float64:
		if p.dom.kind != dFloat || p.dom.f32 {
			return false
		}
		f, _ := lit.floats(rec, 0, nil, false)
		v, _ := f(0)
		compareValues(out, a, a.Float64Values(), v, cmpFloat, mask)
	case *array.String:
		if p.dom.kind != dString {
			return false
		}
		l := lit.lit.s
		for i := range out {
			out[i] = mask >> (strings.Compare(a.Value(i), l) + 1) & 1
		}
		nullsInto(out, a)
	default:
		return false
	}
	return true
}

// inSetPred is x IN (literals…) over a top-level string or long column:
// one pass with a set lookup per row instead of one comparison per
// literal.
type inSetPred struct {
	col  int
	strs map[string]struct{}
	list []string // strs, when few: comparing beats hashing
	ints map[int64]struct{}
}

// maxListed bounds the string lists hasString scans rather than hashes.
const maxListed = 8

func (p *inSetPred) hasString(v string) bool {
	if p.list != nil {
		for _, s := range p.list {
			if s == v {
				return true
			}
		}
		return false
	}
	_, ok := p.strs[v]
	return ok
}

// inSet returns the inSetPred equivalent to eqs (x = a OR x = b …) when
// every one compares the same top-level string or long column of schema
// with a literal; nil otherwise.
func inSet(schema *arrow.Schema, eqs []predicate) *inSetPred {
	set := &inSetPred{col: -1}
	for _, e := range eqs {
		c, ok := e.(*cmpPred)
		if !ok || c.l.col == nil || len(c.l.col.idx) != 1 || c.r.col != nil || c.r.pred != nil || (set.col >= 0 && set.col != c.l.col.idx[0]) {
			return nil
		}
		set.col = c.l.col.idx[0]
		switch id := schema.Field(set.col).Type.ID(); {
		case c.dom.kind == dString && id == arrow.STRING && set.ints == nil:
			if set.strs == nil {
				set.strs = map[string]struct{}{}
			}
			set.strs[c.r.lit.s] = struct{}{}
		case c.dom.kind == dInt && id == arrow.INT64 && c.r.lit.typ == litInt && set.strs == nil:
			if set.ints == nil {
				set.ints = map[int64]struct{}{}
			}
			set.ints[c.r.lit.i] = struct{}{}
		default:
			return nil
		}
	}
	if len(set.strs) <= maxListed {
		for v := range set.strs {
			set.list = append(set.list, v)
		}
	}
	return set
}

func (p *inSetPred) eval(rec arrow.RecordBatch, out []uint8, _ *scratch) {
	arr := rec.Column(p.col)
	switch a := arr.(type) {
	case *array.String:
		for i := range out {
			out[i] = triFalse
			if p.hasString(a.Value(i)) {
				out[i] = triTrue
			}
		}
	case *array.Int64:
		for i, v := range a.Int64Values() {
			_, ok := p.ints[v]
			out[i] = triFalse
			if ok {
				out[i] = triTrue
			}
		}
	}
	nullsInto(out, arr)
}

// compareValues compares every value of vals (arr's) with lit.
func compareValues[T, L any](out []uint8, arr arrow.Array, vals []T, lit L, cmp func(T, L) int, mask uint8) {
	for i, v := range vals[:len(out)] {
		out[i] = mask >> (cmp(v, lit) + 1) & 1
	}
	nullsInto(out, arr)
}

// nullsInto sets the rows where arr is null to NULL.
func nullsInto(out []uint8, arr arrow.Array) {
	if arr.NullN() == 0 {
		return
	}
	for i := range out {
		if arr.IsNull(i) {
			out[i] = triNull
		}
	}
}

// getter returns row i's value and whether it is not NULL.
type getter[T any] func(i int) (T, bool)

func compareInto[T any](out []uint8, l, r getter[T], cmp func(a, b T) int, mask uint8, nullSafe bool) {
	for i := range out {
		a, aok := l(i)
		b, bok := r(i)
		switch {
		case aok && bok:
			out[i] = mask >> (cmp(a, b) + 1) & 1
		case nullSafe:
			out[i] = triFalse
			if !aok && !bok {
				out[i] = triTrue
			}
		default:
			out[i] = triNull
		}
	}
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpFloat orders as Spark does: NaN equals NaN and is above every other
// value.
func cmpFloat(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmpOrdered(a, b)
}

func noop() {}

// validity returns whether row i of o is not NULL.
func (o operand) validity(rec arrow.RecordBatch, n int, sc *scratch) (func(int) bool, func()) {
	switch {
	case o.col != nil:
		_, valid := o.col.resolve(rec)
		return valid, noop
	case o.pred != nil:
		buf := sc.get(n)
		sc.run(o.pred, rec, buf)
		return func(i int) bool { return buf[i] != triNull }, func() { sc.put(buf) }
	}
	null := o.class == cNull
	return func(int) bool { return !null }, noop
}

// ints reads o as int64: integers, booleans (0, 1), dates (days) and
// timestamps (microseconds; a date compared as timestamp_ntz is its
// midnight).
func (o operand) ints(rec arrow.RecordBatch, n int, sc *scratch) (getter[int64], func()) {
	if o.pred != nil {
		buf := sc.get(n)
		sc.run(o.pred, rec, buf)
		return func(i int) (int64, bool) { return int64(buf[i]), buf[i] != triNull }, func() { sc.put(buf) }
	}
	if o.col == nil {
		v := o.lit.i
		if o.lit.typ == litBool && o.lit.b {
			v = 1
		}
		if o.dateMicros {
			v *= 86400e6
		}
		return func(int) (int64, bool) { return v, true }, noop
	}
	leaf, valid := o.col.resolve(rec)
	var get func(int) int64
	switch a := leaf.(type) {
	case *array.Boolean:
		get = func(i int) int64 {
			if a.Value(i) {
				return 1
			}
			return 0
		}
	case *array.Int8:
		get = widen(a.Value)
	case *array.Int16:
		get = widen(a.Value)
	case *array.Int32:
		get = widen(a.Value)
	case *array.Int64:
		get = a.Value
	case *array.Date32:
		get = widen(a.Value)
		if o.dateMicros {
			get = func(i int) int64 { return int64(a.Value(i)) * 86400e6 }
		}
	case *array.Timestamp:
		// In microseconds (rounded down), as Delta stores them.
		unit := a.DataType().(*arrow.TimestampType).Unit
		get = func(i int) int64 { return parquetio.TimestampMicros(int64(a.Value(i)), unit) }
	}
	return func(i int) (int64, bool) {
		if !valid(i) {
			return 0, false
		}
		return get(i), true
	}, noop
}

// widen reads an integer array's values as int64.
func widen[T ~int8 | ~int16 | ~int32](value func(int) T) func(int) int64 {
	return func(i int) int64 { return int64(value(i)) }
}

// floats reads a numeric o as float64, rounded to float32 when f32.
func (o operand) floats(rec arrow.RecordBatch, n int, sc *scratch, f32 bool) (getter[float64], func()) {
	round := func(f float64) float64 {
		if f32 {
			return float64(float32(f))
		}
		return f
	}
	if o.col == nil {
		var v float64
		switch o.lit.typ {
		case litInt:
			v = float64(o.lit.i)
		case litDecimal:
			v = decimalToFloat(o.lit.dec, o.lit.scale)
		default:
			v = o.lit.f
		}
		v = round(v)
		return func(int) (float64, bool) { return v, true }, noop
	}
	leaf, valid := o.col.resolve(rec)
	var get func(int) float64
	switch a := leaf.(type) {
	case *array.Float32:
		get = func(i int) float64 { return float64(a.Value(i)) }
	case *array.Float64:
		get = a.Value
	case *array.Decimal128:
		scale := o.scale
		get = func(i int) float64 { return decimalToFloat(a.Value(i), scale) }
	default:
		ints, release := o.ints(rec, n, sc)
		return func(i int) (float64, bool) {
			v, ok := ints(i)
			return round(float64(v)), ok
		}, release
	}
	return func(i int) (float64, bool) {
		if !valid(i) {
			return 0, false
		}
		return round(get(i)), true
	}, noop
}

// exactPow10 are the powers of ten a float64 holds exactly.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// decimalToFloat is n at scale as the nearest float64, as Spark's
// (Java BigDecimal's) doubleValue: one division of exact values when
// both fit a float64 exactly, else the decimal text parsed.
// (decimal128's ToFloat64 multiplies by an inexact 10^-scale: 2.9 at
// scale 1 becomes 2.9000000000000004.)
func decimalToFloat(n decimal128.Num, scale int32) float64 {
	const exact = 1 << 53
	hi, v := n.HighBits(), int64(n.LowBits())
	if (hi == 0 && v >= 0 || hi == -1 && v < 0) && v > -exact && v < exact && scale >= 0 && int(scale) < len(exactPow10) {
		return float64(v) / exactPow10[scale]
	}
	f, _ := strconv.ParseFloat(n.ToString(scale), 64)
	return f
}

// decimals reads an integer or decimal o as a decimal at scale (domainOf
// checked that every value fits).
func (o operand) decimals(rec arrow.RecordBatch, scale int32) getter[decimal128.Num] {
	up := scale - o.scale
	if o.col == nil {
		v := decimal128.FromI64(o.lit.i)
		if o.lit.typ == litDecimal {
			v = o.lit.dec
		}
		v = v.IncreaseScaleBy(up)
		return func(int) (decimal128.Num, bool) { return v, true }
	}
	leaf, valid := o.col.resolve(rec)
	if a, ok := leaf.(*array.Decimal128); ok {
		return func(i int) (decimal128.Num, bool) {
			if !valid(i) {
				return decimal128.Num{}, false
			}
			return a.Value(i).IncreaseScaleBy(up), true
		}
	}
	ints, _ := o.ints(rec, 0, nil) // a column: no scratch needed
	return func(i int) (decimal128.Num, bool) {
		v, ok := ints(i)
		return decimal128.FromI64(v).IncreaseScaleBy(up), ok
	}
}

// strings reads a string o.
func (o operand) strings(rec arrow.RecordBatch) getter[string] {
	if o.col == nil {
		v := o.lit.s
		return func(int) (string, bool) { return v, true }
	}
	leaf, valid := o.col.resolve(rec)
	type stringArray interface{ Value(int) string }
	a := leaf.(stringArray)
	return func(i int) (string, bool) {
		if !valid(i) {
			return "", false
		}
		return a.Value(i), true
	}
}
