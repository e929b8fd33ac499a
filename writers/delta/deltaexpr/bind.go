package deltaexpr

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// class is the type class of an operand, after Spark's coercion view:
// integers of every width are one class (compared as long), so are dates
// (days) and the two timestamp kinds (microseconds).
type class uint8

const (
	cNull class = iota
	cBool
	cInt
	cFloat32
	cFloat
	cDecimal
	cString
	cDate
	cTimestamp // with a time zone (Delta timestamp)
	cTimestampNTZ
)

var classNames = [...]string{"NULL", "boolean", "integer", "float", "double", "decimal", "string", "date", "timestamp", "timestamp_ntz"}

func (c class) String() string { return classNames[c] }

// colRef is a resolved column: the field index at each level of its path.
type colRef struct {
	name string // as the expression wrote it, for messages
	idx  []int
}

// operand is a bound comparison operand: a column, a literal (already
// coerced to the comparison's domain), or a boolean sub-expression.
type operand struct {
	class       class
	prec, scale int32 // cDecimal (cInt: the precision of its decimal form)
	col         *colRef
	pred        predicate
	lit         literal
	// dateMicros: a date compared as a timestamp_ntz (midnight).
	dateMicros bool
}

// Bound is an expression bound to the columns of one Arrow schema; it
// may be used concurrently.
type Bound struct {
	root  predicate
	cols  []*colRef
	nodes int // predicates bound (a measure of the work per row)
}

// Bind resolves e's columns in schema (names as Spark resolves them:
// exactly, else case-insensitively when unique) and coerces its literals
// to the types they are compared with, as Spark does. A column or
// comparison of a type outside the subset is ErrUnsupported.
func (e *Expr) Bind(schema *arrow.Schema) (*Bound, error) {
	b := &binder{schema: schema, cols: map[string]*colRef{}}
	root, err := b.pred(e)
	if err != nil {
		return nil, err
	}
	return &Bound{root: root, cols: b.order, nodes: b.nodes}, nil
}

// maxNodes bounds the predicates one expression binds to. An operand
// BETWEEN and IN compare more than once is bound once and shared
// (sharedPred), so the count is linear in the text; this is a backstop.
const maxNodes = 4 * MaxLength

type binder struct {
	schema *arrow.Schema
	cols   map[string]*colRef // by field index path
	order  []*colRef
	nodes  int // predicates bound so far
}

// node counts one more predicate bound, refusing more than maxNodes.
func (b *binder) node() error {
	if b.nodes++; b.nodes > maxNodes {
		return fmt.Errorf("expression binds to more than %d conditions", maxNodes)
	}
	return nil
}

func (b *binder) pred(e *Expr) (predicate, error) {
	if err := b.node(); err != nil {
		return nil, err
	}
	switch e.kind {
	case kAnd, kOr:
		args := make([]predicate, len(e.args))
		for i, a := range e.args {
			p, err := b.pred(a)
			if err != nil {
				return nil, err
			}
			args[i] = p
		}
		return &logicPred{or: e.kind == kOr, args: args}, nil
	case kNot:
		p, err := b.pred(e.args[0])
		if err != nil {
			return nil, err
		}
		return &notPred{arg: p}, nil
	case kIsNull:
		v, err := b.operand(e.args[0])
		if err != nil {
			return nil, err
		}
		return &isNullPred{v: v, not: e.not}, nil
	case kCmp:
		return b.compare(e.op, e.args[0], e.args[1])
	case kIn:
		x, err := b.shared(e.args[0])
		if err != nil {
			return nil, err
		}
		eqs := make([]predicate, len(e.args)-1)
		for i, a := range e.args[1:] {
			r, err := b.operand(a)
			if err != nil {
				return nil, err
			}
			if eqs[i], err = b.compareOperands("=", x, r, e.args[0], a); err != nil {
				return nil, err
			}
		}
		// x IN (a, b) is x = a OR x = b, NULLs included.
		var p predicate = &logicPred{or: true, args: eqs}
		if set := inSet(b.schema, eqs); set != nil {
			p = set
		}
		if e.not {
			p = &notPred{arg: p}
		}
		return p, nil
	case kBetween:
		x, err := b.shared(e.args[0])
		if err != nil {
			return nil, err
		}
		bounds := [2]predicate{}
		for i, op := range [2]string{">=", "<="} {
			r, err := b.operand(e.args[i+1])
			if err != nil {
				return nil, err
			}
			// BETWEEN is its two comparisons, in Spark too.
			if bounds[i], err = b.compareOperands(op, minimal(x), minimal(r), e.args[0], e.args[i+1]); err != nil {
				return nil, err
			}
		}
		lo, hi := bounds[0], bounds[1]
		var p predicate = &logicPred{args: []predicate{lo, hi}}
		if e.not {
			p = &notPred{arg: p}
		}
		return p, nil
	}
	// A column or literal used as a condition must be boolean.
	v, err := b.operand(e)
	if err != nil {
		return nil, err
	}
	switch v.class {
	case cBool:
		return &boolPred{v: v}, nil
	case cNull:
		return constPred(triNull), nil
	}
	return nil, fmt.Errorf("%s is a %s, not a condition: %w", describe(e), v.class, ErrUnsupported)
}

// shared binds an operand compared more than once (BETWEEN, IN): a
// condition is bound once and evaluated once per evaluation.
func (b *binder) shared(e *Expr) (operand, error) {
	o, err := b.operand(e)
	if o.pred != nil {
		o.pred = &sharedPred{p: o.pred}
	}
	return o, err
}

// operand binds a comparison operand.
func (b *binder) operand(e *Expr) (operand, error) {
	switch e.kind {
	case kCol:
		return b.column(e.path)
	case kLit:
		return literalOperand(e.lit), nil
	}
	p, err := b.pred(e)
	if err != nil {
		return operand{}, err
	}
	return operand{class: cBool, pred: p}, nil
}

func literalOperand(l literal) operand {
	switch l.typ {
	case litNull:
		return operand{class: cNull}
	case litBool:
		return operand{class: cBool, lit: l}
	case litInt:
		// Typed int when it fits one, else long, as Spark types it.
		prec := int32(20)
		if l.i >= math.MinInt32 && l.i <= math.MaxInt32 {
			prec = 10
		}
		return operand{class: cInt, prec: prec, lit: l}
	case litDecimal:
		return operand{class: cDecimal, prec: l.prec, scale: l.scale, lit: l}
	case litDouble:
		return operand{class: cFloat, lit: l}
	case litFloat:
		return operand{class: cFloat32, lit: l}
	case litDate:
		return operand{class: cDate, lit: l}
	case litTime:
		// A TIMESTAMP literal is zoned or not; its column decides (coerce).
		return operand{class: cTimestamp, lit: l}
	}
	return operand{class: cString, lit: l}
}

// minimal gives an integer literal the precision of its digits, as
// Spark's literalPickMinimumPrecision does in a binary comparison with a
// decimal (p >= 0 on a decimal(38, 20) fits; IN types its list as
// int or long instead).
func minimal(o operand) operand {
	if o.col == nil && o.pred == nil && o.class == cInt {
		o.prec = int32(len(strconv.FormatInt(o.lit.i, 10)))
		if o.lit.i < 0 {
			o.prec--
		}
	}
	return o
}

// column resolves path in the schema.
func (b *binder) column(path []string) (operand, error) {
	name := Clip(strings.Join(path, "."))
	var t arrow.DataType
	fields := b.schema.Fields()
	var idx []int
	for depth, part := range path {
		i := findField(fields, part)
		if i < 0 {
			return operand{}, fmt.Errorf("column %s does not exist", name)
		}
		idx = append(idx, i)
		t = fields[i].Type
		if depth < len(path)-1 {
			st, ok := t.(*arrow.StructType)
			if !ok {
				return operand{}, fmt.Errorf("column %s: %s is not a struct", name, Clip(strings.Join(path[:depth+1], ".")))
			}
			fields = st.Fields()
		}
	}
	// By the field it resolves to: `a.b` and a.b may be different ones.
	key := fmt.Sprint(idx)
	ref := b.cols[key]
	if ref == nil {
		ref = &colRef{name: name, idx: idx}
		b.cols[key] = ref
		b.order = append(b.order, ref)
	}
	op := operand{col: ref}
	switch t := t.(type) {
	case *arrow.BooleanType:
		op.class = cBool
	case *arrow.Int8Type:
		op.class, op.prec = cInt, 3
	case *arrow.Int16Type:
		op.class, op.prec = cInt, 5
	case *arrow.Int32Type:
		op.class, op.prec = cInt, 10
	case *arrow.Int64Type:
		op.class, op.prec = cInt, 20
	case *arrow.Float32Type:
		op.class = cFloat32
	case *arrow.Float64Type:
		op.class = cFloat
	case *arrow.Decimal128Type:
		op.class, op.prec, op.scale = cDecimal, t.Precision, t.Scale
	case *arrow.StringType, *arrow.LargeStringType:
		op.class = cString
	case *arrow.Date32Type:
		op.class = cDate
	case *arrow.TimestampType:
		op.class = cTimestamp
		if t.TimeZone == "" {
			op.class = cTimestampNTZ
		}
	default:
		return operand{}, fmt.Errorf("column %s of type %s: %w", name, t, ErrUnsupported)
	}
	return op, nil
}

// findField returns the index of name among fields: the exact name, else
// the only case-insensitive match; -1 when none.
func findField(fields []arrow.Field, name string) int {
	found := -1
	for i, f := range fields {
		if f.Name == name {
			return i
		}
		if strings.EqualFold(f.Name, name) {
			if found >= 0 {
				return -1
			}
			found = i
		}
	}
	return found
}

// compare binds l op r, both coerced to one domain as Spark's comparison
// coercion does for the supported types.
func (b *binder) compare(op string, le, re *Expr) (predicate, error) {
	l, err := b.operand(le)
	if err != nil {
		return nil, err
	}
	r, err := b.operand(re)
	if err != nil {
		return nil, err
	}
	return b.compareOperands(op, minimal(l), minimal(r), le, re)
}

// compareOperands binds l op r, the bound operands of le and re.
func (b *binder) compareOperands(op string, l, r operand, le, re *Expr) (predicate, error) {
	if err := b.node(); err != nil {
		return nil, err
	}
	var err error
	if l.class == cNull || r.class == cNull {
		if op != "<=>" {
			return constPred(triNull), nil
		}
		if l.class == cNull && r.class == cNull {
			return constPred(triTrue), nil
		}
		if l.class == cNull {
			l = r
		}
		return &isNullPred{v: l}, nil
	}
	// A string literal takes the type of the other side.
	if l.col == nil && l.pred == nil && l.class == cString && r.class != cString {
		if l, err = coerceString(l.lit.s, r.class); err != nil {
			return nil, err
		}
	}
	if r.col == nil && r.pred == nil && r.class == cString && l.class != cString {
		if r, err = coerceString(r.lit.s, l.class); err != nil {
			return nil, err
		}
	}
	if err := coerceTimestamps(&l, &r); err != nil {
		return nil, err
	}
	dom, err := domainOf(l, r)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s: %w", describe(le), op, describe(re), err)
	}
	return &cmpPred{op: opMask(op), nullSafe: op == "<=>", dom: dom, l: l, r: r}, nil
}

// coerceString reads a string literal as a value of class c.
func coerceString(s string, c class) (operand, error) {
	switch c {
	case cDate:
		d, err := parseDate(s)
		return operand{class: cDate, lit: literal{typ: litDate, i: d}}, err
	case cTimestamp, cTimestampNTZ:
		t, zoned, err := parseTimestamp(s)
		return operand{class: cTimestamp, lit: literal{typ: litTime, i: t, zoned: zoned}}, err
	case cBool:
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true":
			return literalOperand(literal{typ: litBool, b: true}), nil
		case "false":
			return literalOperand(literal{typ: litBool}), nil
		}
		// Spark reads more spellings (t, yes, 1…): refused, not guessed.
		return operand{}, fmt.Errorf("string literal other than 'true' or 'false' compared with a boolean: %w", ErrUnsupported)
	case cInt, cFloat, cFloat32, cDecimal:
		// Spark casts the string to the column's type (an invalid one
		// to NULL, a decimal column's comparison to double): refused
		// rather than evaluated otherwise.
		return operand{}, fmt.Errorf("string literal compared with a number: %w", ErrUnsupported)
	}
	return operand{}, fmt.Errorf("string literal compared with a %s: %w", c, ErrUnsupported)
}

// coerceTimestamps settles TIMESTAMP literals and dates compared with
// timestamps. A literal compared with a timestamp (with time zone) column
// must name its zone: Spark reads one without in the session time zone,
// which the table does not record.
func coerceTimestamps(l, r *operand) error {
	for _, pair := range [2][2]*operand{{l, r}, {r, l}} {
		a, other := pair[0], pair[1]
		if a.col != nil || a.class != cTimestamp || a.lit.typ != litTime {
			continue
		}
		switch other.class {
		case cTimestampNTZ:
			if a.lit.zoned {
				return fmt.Errorf("a timestamp literal with a time zone compared with a timestamp_ntz column: %w", ErrUnsupported)
			}
			a.class = cTimestampNTZ
		case cTimestamp:
			if !a.lit.zoned && other.col != nil {
				return fmt.Errorf("a timestamp literal without a time zone compared with a timestamp column (Spark reads it in the session time zone, which the table does not record; write it with Z or an offset): %w", ErrUnsupported)
			}
		}
	}
	// A date compared with a timestamp_ntz is its midnight.
	if l.class == cDate && r.class == cTimestampNTZ {
		l.class, l.dateMicros = cTimestampNTZ, true
	}
	if r.class == cDate && l.class == cTimestampNTZ {
		r.class, r.dateMicros = cTimestampNTZ, true
	}
	return nil
}

// domain is the representation a comparison runs in.
type domain struct {
	kind  domKind
	f32   bool  // dFloat: values rounded to float32 first
	scale int32 // dDecimal
}

type domKind uint8

const (
	dInt domKind = iota // also booleans, dates, timestamps
	dFloat
	dDecimal
	dString
)

func isNumeric(c class) bool { return c == cInt || c == cFloat32 || c == cFloat || c == cDecimal }

// domainOf is the domain l and r are compared in, following Spark's
// widening: any double makes it double, a float with integers float, a
// decimal with integers or decimals an exact decimal at the larger scale.
func domainOf(l, r operand) (domain, error) {
	switch {
	case isNumeric(l.class) && isNumeric(r.class):
		switch {
		case l.class == cFloat || r.class == cFloat || l.class == cDecimal || r.class == cDecimal:
			if l.class == cFloat32 || r.class == cFloat32 || l.class == cFloat || r.class == cFloat {
				return domain{kind: dFloat}, nil
			}
			scale := max(l.scale, r.scale)
			for _, o := range []operand{l, r} {
				if o.prec+scale-o.scale > decimal128.MaxPrecision {
					return domain{}, fmt.Errorf("decimals of precision %d and scale %d need more than %d digits at scale %d: %w", o.prec, o.scale, decimal128.MaxPrecision, scale, ErrUnsupported)
				}
			}
			return domain{kind: dDecimal, scale: scale}, nil
		case l.class == cFloat32 || r.class == cFloat32:
			return domain{kind: dFloat, f32: true}, nil
		}
		return domain{kind: dInt}, nil
	case l.class != r.class:
		return domain{}, fmt.Errorf("comparison of %s and %s: %w", l.class, r.class, ErrUnsupported)
	case l.class == cString:
		return domain{kind: dString}, nil
	}
	return domain{kind: dInt}, nil // booleans, dates, timestamps
}

// opMask encodes a comparison as the set of outcomes (less, equal,
// greater: bits 0, 1, 2) that make it true.
func opMask(op string) uint8 {
	switch op {
	case "<":
		return 1
	case "<=":
		return 3
	case ">":
		return 4
	case ">=":
		return 6
	case "<>":
		return 5
	}
	return 2 // = and <=>
}

// describe renders e for messages.
func describe(e *Expr) string {
	switch e.kind {
	case kCol:
		return Clip(strings.Join(e.path, "."))
	case kLit:
		return e.lit.typ.String()
	}
	return "(condition)"
}

func (t litType) String() string {
	return [...]string{"NULL", "boolean literal", "integer literal", "decimal literal", "double literal", "float literal", "string literal", "DATE literal", "TIMESTAMP literal"}[t]
}
