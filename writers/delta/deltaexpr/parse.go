// Package deltaexpr parses and evaluates the subset of Spark SQL that
// Delta CHECK constraints (table properties delta.constraints.<name>) and
// column invariants are written in: column references (backticked names,
// nested a.b), literals (integers, decimals, floats, strings, TRUE, FALSE,
// NULL, DATE '…', TIMESTAMP '…'), the comparisons = == <> != < <= > >= <=>,
// AND, OR, NOT, IS [NOT] NULL, [NOT] IN (list), [NOT] BETWEEN and
// parentheses, keywords in any case. Anything else (functions, arithmetic,
// LIKE, CASE, subqueries…) is refused with ErrUnsupported naming it, so a
// table whose rules Quiver cannot check is refused rather than written
// unchecked.
//
// Expressions come from table properties, which are hostile input: their
// length (MaxLength) and nesting depth (MaxDepth) are bounded.
//
// Evaluation (Bind, Bound.FirstViolation) runs column-wise on Arrow
// arrays with Spark's three-valued logic; a row satisfies a constraint
// only when the expression is TRUE (NULL violates, as in Delta).
package deltaexpr

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// Bounds on an expression's text and nesting (parentheses, NOT, IN and
// BETWEEN operands count as levels).
const (
	MaxLength = 16 << 10
	MaxDepth  = 64
)

// ErrUnsupported marks an expression outside the supported subset.
var ErrUnsupported = errors.New("unsupported in a Delta constraint")

// kind is the kind of an expression node.
type kind uint8

const (
	kCol     kind = iota // path
	kLit                 // lit
	kCmp                 // op, args[0] op args[1]
	kAnd                 // args (two or more)
	kOr                  // args (two or more)
	kNot                 // args[0]
	kIsNull              // args[0] IS NULL (not: IS NOT NULL)
	kIn                  // args[0] IN (args[1:]) (not: NOT IN)
	kBetween             // args[0] BETWEEN args[1] AND args[2] (not: NOT BETWEEN)
)

// Expr is a parsed expression.
type Expr struct {
	kind kind
	op   string   // kCmp: = <> < <= > >= <=>
	not  bool     // kIsNull, kIn, kBetween negated
	path []string // kCol
	lit  literal  // kLit
	args []*Expr
}

// litType is the type of a literal.
type litType uint8

const (
	litNull litType = iota
	litBool
	litInt     // i
	litDecimal // dec, prec, scale
	litDouble  // f
	litFloat   // f (a float32 value)
	litString  // s
	litDate    // i: days since the epoch
	litTime    // i: microseconds since the epoch; zoned says whether the text gave a zone
)

type literal struct {
	typ         litType
	b           bool
	i           int64
	f           float64
	dec         decimal128.Num
	prec, scale int32
	s           string
	zoned       bool
}

// Parse parses text, refusing text longer than MaxLength, nested deeper
// than MaxDepth, or outside the subset (ErrUnsupported, naming the
// construct).
func Parse(text string) (*Expr, error) {
	if len(text) > MaxLength {
		return nil, fmt.Errorf("expression is %d bytes long, more than %d", len(text), MaxLength)
	}
	toks, err := lex(text)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	e, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.k != tEOF {
		return nil, p.unexpected(t)
	}
	return e, nil
}

type parser struct {
	toks []token
	pos  int
}

func (p *parser) peek() token { return p.toks[p.pos] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.k != tEOF {
		p.pos++
	}
	return t
}

// keyword reports whether the next token is the keyword kw, consuming it
// when so.
func (p *parser) keyword(kw string) bool {
	if t := p.peek(); t.k == tIdent && !t.quoted && strings.EqualFold(t.s, kw) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) punct(s string) bool {
	if t := p.peek(); t.k == tPunct && t.s == s {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expect(s string) error {
	if !p.punct(s) {
		return p.unexpected(p.peek())
	}
	return nil
}

func (p *parser) unexpected(t token) error {
	if t.k == tEOF {
		return fmt.Errorf("unexpected end of expression")
	}
	if t.k == tPunct && strings.ContainsAny(t.s, "+-*/%|&^~") {
		return fmt.Errorf("operator %s (arithmetic, bitwise or concatenation): %w", t.s, ErrUnsupported)
	}
	return fmt.Errorf("unexpected %s at offset %d", t.describe(), t.at)
}

func deeper(depth int) error {
	if depth >= MaxDepth {
		return fmt.Errorf("expression nests deeper than %d levels", MaxDepth)
	}
	return nil
}

// or and and parse chains into one n-ary node, so that evaluation depth
// follows nesting, not the number of terms.
func (p *parser) or(depth int) (*Expr, error) {
	return p.chain(depth, "OR", kOr, p.and)
}

func (p *parser) and(depth int) (*Expr, error) {
	return p.chain(depth, "AND", kAnd, p.not)
}

func (p *parser) chain(depth int, kw string, k kind, sub func(int) (*Expr, error)) (*Expr, error) {
	first, err := sub(depth)
	if err != nil {
		return nil, err
	}
	args := []*Expr{first}
	for p.keyword(kw) {
		e, err := sub(depth)
		if err != nil {
			return nil, err
		}
		args = append(args, e)
	}
	if len(args) == 1 {
		return first, nil
	}
	return &Expr{kind: k, args: args}, nil
}

func (p *parser) not(depth int) (*Expr, error) {
	if p.keyword("NOT") || p.punct("!") {
		if err := deeper(depth); err != nil {
			return nil, err
		}
		e, err := p.not(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Expr{kind: kNot, args: []*Expr{e}}, nil
	}
	return p.predicate(depth)
}

var comparisons = map[string]string{"=": "=", "==": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "<=>": "<=>"}

func (p *parser) predicate(depth int) (*Expr, error) {
	left, err := p.primary(depth)
	if err != nil {
		return nil, err
	}
	t := p.peek()
	if t.k == tPunct {
		if op, ok := comparisons[t.s]; ok {
			p.next()
			right, err := p.primary(depth)
			if err != nil {
				return nil, err
			}
			return &Expr{kind: kCmp, op: op, args: []*Expr{left, right}}, nil
		}
	}
	if p.keyword("IS") {
		not := p.keyword("NOT")
		if !p.keyword("NULL") {
			if t := p.peek(); t.k == tIdent {
				return nil, fmt.Errorf("IS %s: %w", Clip(strings.ToUpper(t.s)), ErrUnsupported)
			}
			return nil, p.unexpected(p.peek())
		}
		return &Expr{kind: kIsNull, not: not, args: []*Expr{left}}, nil
	}
	not := p.keyword("NOT")
	switch {
	case p.keyword("IN"):
		if err := deeper(depth); err != nil {
			return nil, err
		}
		if err := p.expect("("); err != nil {
			return nil, err
		}
		if t := p.peek(); t.k == tIdent && !t.quoted && strings.EqualFold(t.s, "SELECT") {
			return nil, fmt.Errorf("subquery: %w", ErrUnsupported)
		}
		args := []*Expr{left}
		for {
			e, err := p.primary(depth + 1)
			if err != nil {
				return nil, err
			}
			args = append(args, e)
			if !p.punct(",") {
				break
			}
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return &Expr{kind: kIn, not: not, args: args}, nil
	case p.keyword("BETWEEN"):
		if err := deeper(depth); err != nil {
			return nil, err
		}
		lo, err := p.primary(depth + 1)
		if err != nil {
			return nil, err
		}
		if !p.keyword("AND") {
			return nil, p.unexpected(p.peek())
		}
		hi, err := p.primary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Expr{kind: kBetween, not: not, args: []*Expr{left, lo, hi}}, nil
	}
	if t := p.peek(); t.k == tIdent && !t.quoted {
		switch u := strings.ToUpper(t.s); u {
		case "LIKE", "ILIKE", "RLIKE", "REGEXP", "SIMILAR":
			return nil, fmt.Errorf("%s: %w", u, ErrUnsupported)
		}
	}
	if not {
		return nil, p.unexpected(p.peek())
	}
	return left, nil
}

// unsupportedWords are keywords that open constructs outside the subset.
var unsupportedWords = map[string]string{
	"CASE": "CASE expression", "CAST": "CAST", "EXISTS": "subquery", "SELECT": "subquery",
	"INTERVAL": "INTERVAL literal", "ARRAY": "ARRAY constructor", "MAP": "MAP constructor",
	"STRUCT": "STRUCT constructor", "X": "binary literal", "TIMESTAMP_LTZ": "TIMESTAMP_LTZ literal",
	"TIMESTAMP_NTZ": "TIMESTAMP_NTZ literal", "R": "raw string literal",
}

// afterOperand are the keywords that may follow an operand.
var afterOperand = map[string]bool{"IS": true, "IN": true, "NOT": true, "BETWEEN": true, "AND": true, "OR": true, "LIKE": true, "ILIKE": true, "RLIKE": true, "REGEXP": true, "SIMILAR": true}

// opensOperand reports whether t, following one of unsupportedWords,
// makes it the start of its construct (X'00', INTERVAL 1 DAY, CASE WHEN)
// rather than a column of that name (x IS NULL, map > 0).
func opensOperand(t token) bool {
	switch t.k {
	case tString, tNumber:
		return true
	case tIdent:
		return t.quoted || !afterOperand[strings.ToUpper(t.s)]
	}
	return false
}

func (p *parser) primary(depth int) (*Expr, error) {
	t := p.next()
	switch t.k {
	case tEOF:
		return nil, p.unexpected(t)
	case tNumber:
		return numberLiteral(t.s, false)
	case tString:
		// Adjacent string literals are one, concatenated (Spark's stringLit+).
		if p.peek().k != tString {
			return &Expr{kind: kLit, lit: literal{typ: litString, s: t.s}}, nil
		}
		var v strings.Builder
		v.WriteString(t.s)
		for p.peek().k == tString {
			v.WriteString(p.next().s)
		}
		return &Expr{kind: kLit, lit: literal{typ: litString, s: v.String()}}, nil
	case tPunct:
		switch t.s {
		case "(":
			if err := deeper(depth); err != nil {
				return nil, err
			}
			if n := p.peek(); n.k == tIdent && !n.quoted && strings.EqualFold(n.s, "SELECT") {
				return nil, fmt.Errorf("subquery: %w", ErrUnsupported)
			}
			e, err := p.or(depth + 1)
			if err != nil {
				return nil, err
			}
			return e, p.expect(")")
		case "-":
			// A negative number is a literal; any other minus is arithmetic.
			if n := p.peek(); n.k == tNumber {
				p.next()
				return numberLiteral(n.s, true)
			}
		}
		return nil, p.unexpected(t)
	}
	// An identifier: a keyword literal, a typed literal, a function call
	// or a column.
	if n := p.peek(); n.k == tPunct && n.s == "(" {
		return nil, fmt.Errorf("function %s(…): %w", Clip(t.s), ErrUnsupported)
	}
	if !t.quoted {
		switch u := strings.ToUpper(t.s); u {
		case "TRUE", "FALSE":
			return &Expr{kind: kLit, lit: literal{typ: litBool, b: u == "TRUE"}}, nil
		case "NULL":
			return &Expr{kind: kLit, lit: literal{typ: litNull}}, nil
		case "DATE", "TIMESTAMP":
			if n := p.peek(); n.k == tString {
				p.next()
				return typedLiteral(u, n.s)
			}
		default:
			if what, bad := unsupportedWords[u]; bad && opensOperand(p.peek()) {
				return nil, fmt.Errorf("%s: %w", what, ErrUnsupported)
			}
		}
	}
	path := []string{t.s}
	for p.punct(".") {
		n := p.next()
		if n.k != tIdent {
			return nil, p.unexpected(n)
		}
		path = append(path, n.s)
		if len(path) > MaxDepth {
			return nil, fmt.Errorf("column path deeper than %d levels", MaxDepth)
		}
	}
	if n := p.peek(); n.k == tPunct && (n.s == "(" || n.s == "[") {
		if n.s == "[" {
			return nil, fmt.Errorf("subscript %s[…]: %w", Clip(strings.Join(path, ".")), ErrUnsupported)
		}
		return nil, fmt.Errorf("function %s(…): %w", Clip(strings.Join(path, ".")), ErrUnsupported)
	}
	return &Expr{kind: kCol, path: path}, nil
}

// maxShown bounds the bytes of a name or literal an error message shows.
const maxShown = 200

// Clip cuts hostile text (a name, a literal, an expression) to at most
// 200 bytes, on a UTF-8 boundary, for messages.
func Clip(s string) string {
	if len(s) <= maxShown {
		return s
	}
	cut := maxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// numberLiteral parses a numeric literal as Spark types it: an integer
// (L, S, Y suffixes too), a decimal (digits with a point, or BD), a double
// (an exponent, or D) or a float (F).
func numberLiteral(s string, neg bool) (*Expr, error) {
	lit := func(l literal) (*Expr, error) { return &Expr{kind: kLit, lit: l}, nil }
	sign := ""
	if neg {
		sign = "-"
	}
	u := strings.ToUpper(s)
	switch {
	case strings.HasSuffix(u, "BD"):
		return decimalLiteral(sign + u[:len(u)-2])
	case strings.HasSuffix(u, "D"):
		f, err := strconv.ParseFloat(sign+u[:len(u)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("invalid number %s", Clip(s))
		}
		return lit(literal{typ: litDouble, f: f})
	case strings.HasSuffix(u, "F"):
		f, err := strconv.ParseFloat(sign+u[:len(u)-1], 32)
		if err != nil {
			return nil, fmt.Errorf("invalid number %s", Clip(s))
		}
		return lit(literal{typ: litFloat, f: f})
	case strings.HasSuffix(u, "L"), strings.HasSuffix(u, "S"), strings.HasSuffix(u, "Y"):
		i, err := strconv.ParseInt(sign+u[:len(u)-1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("invalid integer %s", Clip(s))
		}
		return lit(literal{typ: litInt, i: i})
	case strings.Contains(u, "E"):
		f, err := strconv.ParseFloat(sign+u, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("invalid number %s", Clip(s))
		}
		return lit(literal{typ: litDouble, f: f})
	case strings.Contains(u, "."):
		return decimalLiteral(sign + u)
	}
	if i, err := strconv.ParseInt(sign+u, 10, 64); err == nil {
		return lit(literal{typ: litInt, i: i})
	}
	return decimalLiteral(sign + u) // beyond a long: decimal(38, 0) in Spark
}

// decimalLiteral parses [-]digits[.digits] as a decimal of at most 38
// digits.
func decimalLiteral(s string) (*Expr, error) {
	intPart, frac, _ := strings.Cut(s, ".")
	digits := strings.TrimLeft(strings.TrimPrefix(intPart, "-")+frac, "0")
	prec := max(int32(len(digits)), int32(len(frac)), 1)
	if prec > 38 {
		return nil, fmt.Errorf("decimal literal %s has more than 38 digits", Clip(s))
	}
	v, ok := new(big.Int).SetString(strings.ReplaceAll(s, ".", ""), 10)
	if !ok {
		return nil, fmt.Errorf("invalid number %s", Clip(s))
	}
	return &Expr{kind: kLit, lit: literal{typ: litDecimal, dec: decimal128.FromBigInt(v), prec: prec, scale: int32(len(frac))}}, nil
}

// typedLiteral parses DATE '…' and TIMESTAMP '…'.
func typedLiteral(kw, s string) (*Expr, error) {
	var (
		l   literal
		err error
	)
	if kw == "DATE" {
		l.typ = litDate
		l.i, err = parseDate(s)
	} else {
		l.typ = litTime
		l.i, l.zoned, err = parseTimestamp(s)
	}
	if err != nil {
		return nil, err
	}
	return &Expr{kind: kLit, lit: l}, nil
}

func parseDate(s string) (int64, error) {
	t, err := time.Parse("2006-01-02", strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("invalid date %q (want yyyy-mm-dd)", Clip(s))
	}
	return t.Unix() / 86400, nil
}

// Timestamp layouts Spark accepts in literals and casts (a subset): a
// date alone, or a date and time with an optional fraction, separated by
// a space or T, with or without a zone offset or Z.
var (
	zonedLayouts   = []string{"2006-01-02 15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999 Z07:00", "2006-01-02 15:04:05.999999999 MST"}
	unzonedLayouts = []string{"2006-01-02", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04", "2006-01-02T15:04"}
)

// parseTimestamp returns the microseconds since the epoch of s, read as
// UTC when it has no zone, and whether it had one.
func parseTimestamp(s string) (int64, bool, error) {
	s = strings.TrimSpace(s)
	for _, layout := range zonedLayouts {
		if t, err := time.Parse(layout, s); err == nil && (!strings.HasSuffix(layout, "MST") || t.Location() == time.UTC) {
			return t.UnixMicro(), true, nil
		}
	}
	for _, layout := range unzonedLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMicro(), false, nil
		}
	}
	return 0, false, fmt.Errorf("invalid timestamp %q (want yyyy-mm-dd[ hh:mm:ss[.ffffff]][zone])", Clip(s))
}

// tokens

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tNumber
	tString
	tPunct
)

type token struct {
	k      tokKind
	s      string
	quoted bool // a backticked identifier: never a keyword
	at     int
}

func (t token) describe() string {
	switch t.k {
	case tString:
		return "string literal"
	case tNumber:
		return "number " + t.s
	}
	return fmt.Sprintf("%q", Clip(t.s))
}

var puncts = []string{"<=>", "==", "<>", "!=", "<=", ">=", "||", "&&", "=", "<", ">", "(", ")", ",", ".", "!", "+", "-", "*", "/", "%", "&", "|", "^", "~", "[", "]", ":", ";", "?"}

func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && i+1 < len(s) && s[i+1] == '-', c == '/' && i+1 < len(s) && s[i+1] == '*':
			return nil, fmt.Errorf("comment at offset %d: %w", i, ErrUnsupported)
		case isIdentStart(c):
			j := i
			for j < len(s) && (isIdentStart(s[j]) || isDigit(s[j])) {
				j++
			}
			toks = append(toks, token{k: tIdent, s: s[i:j], at: i})
			i = j
		case isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]):
			j := i
			for j < len(s) && (isDigit(s[j]) || s[j] == '.') {
				j++
			}
			if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
				k := j + 1
				if k < len(s) && (s[k] == '+' || s[k] == '-') {
					k++
				}
				if k < len(s) && isDigit(s[k]) {
					for j = k; j < len(s) && isDigit(s[j]); j++ {
					}
				}
			}
			// Spark's type suffixes: L, S, Y, D, F, BD.
			if j+1 < len(s) && (s[j] == 'b' || s[j] == 'B') && (s[j+1] == 'd' || s[j+1] == 'D') {
				j += 2
			} else if j < len(s) && strings.IndexByte("lLsSyYdDfF", s[j]) >= 0 {
				j++
			}
			if j < len(s) && (isIdentStart(s[j]) || isDigit(s[j]) || s[j] == '.') || strings.Count(s[i:j], ".") > 1 {
				return nil, fmt.Errorf("invalid number at offset %d", i)
			}
			toks = append(toks, token{k: tNumber, s: s[i:j], at: i})
			i = j
		case c == '`':
			v, n, err := quoted(s[i:], '`', false)
			if err != nil {
				return nil, fmt.Errorf("%w at offset %d", err, i)
			}
			toks = append(toks, token{k: tIdent, s: v, quoted: true, at: i})
			i += n
		case c == '\'' || c == '"':
			v, n, err := quoted(s[i:], c, true)
			if err != nil {
				return nil, fmt.Errorf("%w at offset %d", err, i)
			}
			toks = append(toks, token{k: tString, s: v, at: i})
			i += n
		default:
			p := ""
			for _, cand := range puncts {
				if strings.HasPrefix(s[i:], cand) {
					p = cand
					break
				}
			}
			if p == "" {
				return nil, fmt.Errorf("unexpected character %q at offset %d", c, i)
			}
			toks = append(toks, token{k: tPunct, s: p, at: i})
			i += len(p)
		}
	}
	return append(toks, token{k: tEOF, at: len(s)}), nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// quoted reads a quoted string or identifier at the start of s (opened by
// q) and returns its value and the bytes read. In an identifier a doubled
// q stands for q; a string, as Spark's lexer reads it, has no such escape
// ('it”s' is two literals, concatenated) but backslash escapes
// (unescape).
func quoted(s string, q byte, backslash bool) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q && !backslash && i+1 < len(s) && s[i+1] == q:
			b.WriteByte(q)
			i++
		case c == q:
			return b.String(), i + 1, nil
		case c == '\\' && backslash && i+1 < len(s):
			n, err := unescape(&b, s[i:])
			if err != nil {
				return "", 0, err
			}
			i += n - 1
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated %c", q)
}

// unescape writes the escape sequence at the start of s (a backslash and
// at least one more byte) as Spark's unescapeSQLString reads it, and
// returns the bytes read: \uXXXX (UTF-16, surrogate pairs joined), \ooo
// (octal, [01][0-7][0-7]), \0 \b \n \r \t \Z, \% and \_ kept with their
// backslash (for LIKE), any other character as itself.
func unescape(b *strings.Builder, s string) (int, error) {
	switch {
	case s[1] == 'u' && isHex(s[2:], 4):
		r := hexRune(s[2:6])
		if utf16.IsSurrogate(r) {
			if len(s) < 12 || s[6:8] != `\u` || !isHex(s[8:], 4) || utf16.DecodeRune(r, hexRune(s[8:12])) == utf8.RuneError {
				return 0, fmt.Errorf("unpaired UTF-16 surrogate \\u%s: %w", s[2:6], ErrUnsupported)
			}
			b.WriteRune(utf16.DecodeRune(r, hexRune(s[8:12])))
			return 12, nil
		}
		b.WriteRune(r)
		return 6, nil
	case s[1] == 'U' && isHex(s[2:], 8):
		// Read by some Spark versions only.
		return 0, fmt.Errorf("\\U escape: %w", ErrUnsupported)
	case len(s) >= 4 && (s[1] == '0' || s[1] == '1') && isOctal(s[2]) && isOctal(s[3]):
		b.WriteByte((s[1]-'0')<<6 | (s[2]-'0')<<3 | (s[3] - '0'))
		return 4, nil
	}
	switch e := s[1]; e {
	case '0':
		b.WriteByte(0)
	case 'b':
		b.WriteByte('\b')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'Z':
		b.WriteByte(26)
	case '%', '_':
		b.WriteByte('\\')
		b.WriteByte(e)
	default:
		b.WriteByte(e)
	}
	return 2, nil
}

// isHex reports whether s starts with n hexadecimal digits.
func isHex(s string, n int) bool {
	if len(s) < n {
		return false
	}
	for i := range n {
		if !isDigit(s[i]) && (s[i]|0x20 < 'a' || s[i]|0x20 > 'f') {
			return false
		}
	}
	return true
}

func hexRune(s string) rune {
	v, _ := strconv.ParseUint(s, 16, 32)
	return rune(v)
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
