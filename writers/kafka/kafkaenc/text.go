package kafkaenc

import (
	"math"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

const hexDigits = "0123456789abcdef"

// jsonSafe[b] is true for ASCII bytes that need no escaping inside a JSON
// string.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// appendJSONString appends s as a quoted JSON string, escaping as
// encoding/json does without HTML escaping: quotes, backslashes, control
// characters, U+2028 and U+2029; invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendDecimal128 appends v with scale as plain decimal text ("-12.340").
// Values that fit in an int64, the common case, are formatted without
// allocating.
func appendDecimal128(dst []byte, v decimal128.Num, scale int32) []byte {
	hi, lo := v.HighBits(), v.LowBits()
	fits := (hi == 0 && lo <= math.MaxInt64) || (hi == -1 && lo > math.MaxInt64)
	if !fits || scale < 0 {
		return append(dst, v.ToString(scale)...)
	}
	n := int64(lo)
	if n < 0 {
		dst = append(dst, '-')
	}
	// Digits of |n|; -MinInt64 overflows int64 but not uint64.
	u := uint64(n)
	if n < 0 {
		u = uint64(-(n + 1)) + 1
	}
	var digits [24]byte
	d := appendUint(digits[:0], u)
	if scale == 0 {
		return append(dst, d...)
	}
	if int(scale) >= len(d) {
		dst = append(dst, '0', '.')
		for range int(scale) - len(d) {
			dst = append(dst, '0')
		}
		return append(dst, d...)
	}
	cut := len(d) - int(scale)
	dst = append(dst, d[:cut]...)
	dst = append(dst, '.')
	return append(dst, d[cut:]...)
}
