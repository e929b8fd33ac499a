package deltaexpr

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseAccepts(t *testing.T) {
	for _, text := range []string{
		"id > 0",
		"id >= -5 AND id <= 10",
		"`weird col` = 'it''s' OR `a``b` IS NULL",
		"s.inner.x <> 1.5",
		"price BETWEEN 0 AND 100.25",
		"price not between 1e3 and 2.5D",
		"status IN ('a', 'b', \"c\")",
		"status NOT IN (1, 2L, 3S, 4Y)",
		"NOT (a IS NOT NULL) or !b",
		"d > DATE '2024-01-01' AND ts < TIMESTAMP '2024-01-01 00:00:00Z'",
		"flag = TRUE AND other <=> NULL",
		"a == b AND a != c",
		"(((a)))",
		"x = 12345678901234567890123",
		"y = 1.5BD and z = 2.0f",
		"name = 'a\\'b\\n'",
		// Columns named as the words opening unsupported constructs.
		"x IS NOT NULL AND map BETWEEN 1 AND 2 AND array IN (1) AND struct > 0",
		"case IS NULL OR cast = 1 OR exists AND NOT select OR interval <> 2",
		"x", "(map)", "X = 1 AND interval",
	} {
		if _, err := Parse(text); err != nil {
			t.Errorf("Parse(%q): %v", text, err)
		}
	}
}

// TestParseStrings: string literals as Spark's lexer and
// unescapeSQLString read them.
func TestParseStrings(t *testing.T) {
	for text, want := range map[string]string{
		`'it''s'`:            "its", // two literals, concatenated
		`'a' "b"  'c'`:       "abc",
		`'a\'b' `:            "a'b",
		`"say \"hi\""`:       `say "hi"`,
		`'\u0041\101\060'`:   "AA0",
		`'\uD83D\uDE00'`:     "\U0001F600",
		`'\u00e9\u20AC'`:     "é€",
		`'\%\_'`:             `\%\_`,
		`'\n\t\r\b\0\Z\q\\'`: "\n\t\r\b\x00\x1aq\\",
		`'\18\u12'`:          "18u12",
		`'\200'`:             "200", // octal starts with 0 or 1
	} {
		e, err := Parse(text)
		if err != nil {
			t.Errorf("Parse(%s): %v", text, err)
			continue
		}
		if e.kind != kLit || e.lit.typ != litString || e.lit.s != want {
			t.Errorf("Parse(%s) = %q, want %q", text, e.lit.s, want)
		}
	}
	for _, text := range []string{`'\uD83D'`, `'\uDE00\uD83D'`, `'\U0001F600'`, `r'x' = a`} {
		if _, err := Parse(text); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Parse(%s) = %v, want ErrUnsupported", text, err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for text, want := range map[string]string{
		"length(name) > 0":               "function length",
		"a + 1 > 2":                      "operator +",
		"a > b * 2":                      "operator *",
		"-a > 0":                         "operator -",
		"name LIKE 'a%'":                 "LIKE",
		"name RLIKE 'a'":                 "RLIKE",
		"CASE WHEN a THEN 1 END = 1":     "CASE",
		"a IN (SELECT x FROM t)":         "subquery",
		"EXISTS (SELECT 1)":              "function EXISTS",
		"a[0] = 1":                       "subscript",
		"a IS TRUE":                      "IS TRUE",
		"a = 1 -- comment":               "comment",
		"a || 'x' = 'y'":                 "operator ||",
		"INTERVAL '1' DAY > a":           "INTERVAL",
		"m.f(1) = 2":                     "function m.f",
		"CAST(a AS INT) = 1":             "function CAST",
		"a = x'00'":                      "binary",
		"TIMESTAMP_NTZ '2024-01-01' < a": "TIMESTAMP_NTZ",
	} {
		_, err := Parse(text)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want ErrUnsupported naming %q", text, err, want)
		}
	}
	for _, text := range []string{"", "a >", "a = 'open", "(a = 1", "a = 1)", "a BETWEEN 1", "a IN ()", "`x", "a = 1x", "DATE 'nope' < a", "a = 1.2.3", "a NOT = 1", "a ? b"} {
		if _, err := Parse(text); err == nil {
			t.Errorf("Parse(%q) succeeded", text)
		}
	}
}

func TestParseBounds(t *testing.T) {
	deep := strings.Repeat("(", MaxDepth+1) + "a" + strings.Repeat(")", MaxDepth+1)
	if _, err := Parse(deep); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Errorf("deep parentheses: %v", err)
	}
	nots := strings.Repeat("NOT ", MaxDepth+1) + "a"
	if _, err := Parse(nots); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Errorf("deep NOTs: %v", err)
	}
	long := "a IN (" + strings.Repeat("1,", MaxLength/2) + "1)"
	if _, err := Parse(long); err == nil || !strings.Contains(err.Error(), "bytes long") {
		t.Errorf("long: %v", err)
	}
	// A long flat chain is fine: it is one node, not a deep tree.
	chain := "a = 1" + strings.Repeat(" OR a = 1", 1000)
	if _, err := Parse(chain); err != nil {
		t.Errorf("flat chain: %v", err)
	}
}

// FuzzParse parses arbitrary text and binds and evaluates what parses
// against testRecord: no panic, bounded.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"id > 0", "a IN (1, 2) AND NOT b BETWEEN 1 AND 2", "`x`.y IS NOT NULL", "d = DATE '2024-01-01'", "s = 'a''b'", "((a))", "f(x)", "1.5e3 < -2", "st.x IN (1, 2) OR ntz < DATE '2024-01-01'", "price <=> 1.5 AND flag",
		// Nested BETWEEN and IN operands (bound and evaluated once), and
		// names that collide once dotted or lower-cased.
		strings.Repeat("(", 20) + "flag" + strings.Repeat(") BETWEEN FALSE AND TRUE", 20),
		strings.Repeat("(", 10) + "flag" + strings.Repeat(") IN (TRUE, FALSE, NULL)", 10),
		"(id BETWEEN 1 AND 5) IN (TRUE) AND (s IN ('a', 'b')) BETWEEN FALSE AND flag",
		"`st.x` > 0 AND st.x > 0 AND ST.X < 9 AND `ID` = id AND `weird col` >= 1",
		"ntzus >= DATE '2020-01-01' AND tsus < TIMESTAMP '2030-01-01 00:00:00Z'",
		"s = 'it''s' OR s = '\u0041\101' OR map IS NULL"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		e, err := Parse(text)
		if err != nil {
			return
		}
		if len(text) > MaxLength {
			t.Fatalf("accepted %d bytes", len(text))
		}
		// Whatever parses binds or fails cleanly, and evaluates.
		rec := testRecord(t)
		defer rec.Release()
		if b, err := e.Bind(rec.Schema()); err == nil {
			if row, found := b.FirstViolation(rec); found {
				_ = b.RowValues(rec, row)
			}
		}
	})
}

// TestErrorsBounded: names and literals in error messages are cut to
// 200 bytes on a UTF-8 boundary.
func TestErrorsBounded(t *testing.T) {
	rec := testRecord(t)
	defer rec.Release()
	long := "a" + strings.Repeat("é", 3000)
	for _, text := range []string{
		"`" + long + "` > 0",
		long + "(1) > 0",
		"id = DATE '" + long + "'",
		"id = TIMESTAMP '" + long + "'",
		"`" + long + "`.x[0] = 1",
		"id IS " + strings.Repeat("Z", 5000),
		"id " + strings.Repeat("Z", 5000),
		"id = 1" + strings.Repeat("5", 5000) + ".5",
	} {
		e, err := Parse(text)
		if err == nil {
			_, err = e.Bind(rec.Schema())
		}
		if err == nil {
			t.Errorf("%.20s…: no error", text)
			continue
		}
		if msg := err.Error(); len(msg) > 600 || !utf8.ValidString(msg) {
			t.Errorf("%.20s…: %d bytes, valid UTF-8 %v", text, len(msg), utf8.ValidString(msg))
		}
	}
	if got := clipChars(strings.Repeat("é", 100), 3); got != "ééé…" {
		t.Errorf("clipChars = %q", got)
	}
	if got := clipChars("éé", 3); got != "éé" {
		t.Errorf("clipChars = %q", got)
	}
}
