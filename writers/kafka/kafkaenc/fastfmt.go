package kafkaenc

import (
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// appendRFC3339 appends timestamp v of unit as time.RFC3339Nano renders
// it in UTC (fraction digits as needed, trailing zeros dropped) without
// building a time.Time: the civil date comes from the day number
// (Hinnant's days_from_civil inverse), a third of what AppendFormat costs.
// Years outside 1..9999 go through time.
func appendRFC3339(dst []byte, v int64, unit arrow.TimeUnit) []byte {
	var sec, nsec int64
	switch unit { // constant divisors: multiplications, not divisions
	case arrow.Second:
		sec = v
	case arrow.Millisecond:
		sec = floorDiv(v, 1e3)
		nsec = (v - sec*1e3) * 1e6
	case arrow.Microsecond:
		sec = floorDiv(v, 1e6)
		nsec = (v - sec*1e6) * 1e3
	default:
		sec = floorDiv(v, 1e9)
		nsec = v - sec*1e9
	}
	days := floorDiv(sec, 86400)
	// 1..9999-12-31: days -719162 .. 2932896 from 1970-01-01.
	if days < -719162 || days > 2932896 {
		return time.Unix(sec, nsec).UTC().AppendFormat(dst, time.RFC3339Nano)
	}
	secOfDay := sec - days*86400
	y, m, d := civil(days)
	dst = append4(dst, y)
	dst = append(dst, '-')
	dst = append2(dst, m)
	dst = append(dst, '-')
	dst = append2(dst, d)
	dst = append(dst, 'T')
	dst = append2(dst, int(secOfDay/3600))
	dst = append(dst, ':')
	dst = append2(dst, int(secOfDay/60%60))
	dst = append(dst, ':')
	dst = append2(dst, int(secOfDay%60))
	if nsec != 0 {
		var frac [10]byte
		frac[0] = '.'
		n := nsec
		for i := 9; i >= 1; i-- {
			frac[i] = byte('0' + n%10)
			n /= 10
		}
		end := 10
		for frac[end-1] == '0' {
			end--
		}
		dst = append(dst, frac[:end]...)
	}
	return append(dst, 'Z')
}

// civil returns the proleptic Gregorian date of days since 1970-01-01,
// a day from 0000-03-01 on.
func civil(days int64) (year, month, day int) {
	z := uint64(days + 719468)
	era := z / 146097
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // [0, 365]
	mp := (5*doy + 2) / 153                                // [0, 11], March first
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	y := int(yoe + era*400)
	if m <= 2 {
		y++
	}
	return y, int(m), int(d)
}

// appendInt appends v in decimal as strconv.AppendInt(dst, v, 10) does,
// writing the digits in place two at a time: strconv renders into a
// buffer of its own and copies it, a third of its time for ids and
// counters.
func appendInt(dst []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		dst = append(dst, '-')
		u = -u
	}
	return appendUint(dst, u)
}

// appendUint appends u in decimal as strconv.AppendUint(dst, u, 10) does.
func appendUint(dst []byte, u uint64) []byte {
	if u < 10 {
		return append(dst, byte('0'+u))
	}
	n := len(dst) + decimalDigits(u)
	dst = slices.Grow(dst, n-len(dst))[:n]
	for u >= 100 {
		q := u / 100
		d := (u - q*100) * 2
		n -= 2
		dst[n], dst[n+1] = digitPairs[d], digitPairs[d+1]
		u = q
	}
	if u >= 10 {
		dst[n-2], dst[n-1] = digitPairs[2*u], digitPairs[2*u+1]
	} else {
		dst[n-1] = byte('0' + u)
	}
	return dst
}

// decimalDigits is the number of decimal digits of u ≥ 10: log10 from the
// bit length (1233/4096 ≈ log10 2), one less when u is below that power.
func decimalDigits(u uint64) int {
	t := bits.Len64(u) * 1233 >> 12
	if u < powersOf10[t] {
		return t
	}
	return t + 1
}

var powersOf10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

func append2(dst []byte, v int) []byte { return append(dst, byte('0'+v/10), byte('0'+v%10)) }

func append4(dst []byte, v int) []byte {
	return append(dst, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
}

// appendCents appends f as strconv's shortest 'f' formatting would and
// reports true when f is a whole number of hundredths below 1e13 (prices,
// amounts): f is then the double nearest to n/100 (IEEE division rounds
// correctly), which the decimal n/100 names, and at that magnitude doubles
// lie closer than 0.01 apart, so no shorter decimal names f. Else it
// appends nothing and reports false.
func appendCents(dst []byte, f float64) ([]byte, bool) {
	if !(f > -1e13 && f < 1e13) {
		return dst, false
	}
	n := math.Round(f * 100)
	if n/100 != f {
		return dst, false
	}
	c := int64(n)
	if c < 0 {
		dst = append(dst, '-')
		c = -c
	} else if c == 0 && math.Signbit(f) {
		dst = append(dst, '-')
	}
	dst = appendInt(dst, c/100)
	switch r := c % 100; {
	case r == 0:
	case r%10 == 0:
		dst = append(dst, '.', byte('0'+r/10))
	default:
		dst = append(dst, '.', byte('0'+r/10), byte('0'+r%10))
	}
	return dst, true
}
