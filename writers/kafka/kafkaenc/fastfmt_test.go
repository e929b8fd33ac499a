package kafkaenc

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestAppendRFC3339MatchesTime: the fast timestamp text is time's
// RFC3339Nano in UTC for random values of every unit, the edges of the
// years 1..9999 and the values outside them.
func TestAppendRFC3339MatchesTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	units := []arrow.TimeUnit{arrow.Second, arrow.Millisecond, arrow.Microsecond, arrow.Nanosecond}
	edges := []int64{0, -1, 1, 86399, 86400, -86400, -86401, 951782400, 253402300799, 253402300800, -62135596800, -62135596801, math.MaxInt64, math.MinInt64}
	check := func(v int64, unit arrow.TimeUnit) {
		t.Helper()
		per := int64(time.Second) / int64(unit.Multiplier())
		sec := floorDiv(v, per)
		want := time.Unix(sec, (v-sec*per)*int64(unit.Multiplier())).UTC().AppendFormat(nil, time.RFC3339Nano)
		if got := appendRFC3339(nil, v, unit); string(got) != string(want) {
			t.Fatalf("appendRFC3339(%d, %s) = %s, want %s", v, unit, got, want)
		}
	}
	for _, unit := range units {
		per := int64(time.Second) / int64(unit.Multiplier())
		for _, e := range edges {
			if e > math.MaxInt64/per || e < math.MinInt64/per {
				check(e, unit)
				continue
			}
			for _, d := range []int64{-1, 0, 1} {
				check(e*per+d, unit)
			}
		}
		for range 20000 {
			switch rng.IntN(3) {
			case 0: // any value
				check(int64(rng.Uint64()), unit)
			case 1: // years 1..9999
				check((rng.Int64N(253402300800+62135596800)-62135596800)*per+rng.Int64N(per), unit)
			default: // round fractions
				check(rng.Int64N(4e9)*per+rng.Int64N(10)*per/10, unit)
			}
		}
	}
}

// TestAppendCentsMatchesStrconv: whenever the cents fast path answers,
// its text is strconv's shortest 'f' formatting; it answers for whole
// hundredths and not for other values.
func TestAppendCentsMatchesStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	answered := 0
	check := func(f float64) {
		t.Helper()
		got, ok := appendCents(nil, f)
		if !ok {
			return
		}
		answered++
		if want := strconv.AppendFloat(nil, f, 'f', -1, 64); string(got) != string(want) {
			t.Fatalf("appendCents(%v) = %s, want %s", f, got, want)
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 0.01, -0.01, 0.1, 0.5, -0.5, 1, 100, 123.45, 9999999999999.99, 1e13, -1e13, 0.005, 1.005, 2.675} {
		check(f)
	}
	for range 200000 {
		switch rng.IntN(4) {
		case 0:
			check(math.Round(rng.Float64()*1e6*100) / 100)
		case 1:
			check(-math.Round(rng.Float64()*1e12*100) / 100)
		case 2:
			check(float64(rng.Int64N(2e15)-1e15) / 100)
		default:
			check(math.Float64frombits(rng.Uint64()))
		}
	}
	if answered < 100000 {
		t.Errorf("the fast path answered %d values, want most of the whole hundredths", answered)
	}
	if _, ok := appendCents(nil, 0.125); ok {
		t.Error("appendCents answered 0.125, not a whole number of hundredths")
	}
}

// TestAppendIntMatchesStrconv compares appendInt and appendUint with
// strconv at every power of ten and its neighbours, the extremes, and
// random values of every magnitude.
func TestAppendIntMatchesStrconv(t *testing.T) {
	check := func(v int64) {
		t.Helper()
		if got, want := string(appendInt([]byte("x"), v)), "x"+strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendInt(%d) = %s, want %s", v, got, want)
		}
		u := uint64(v)
		if got, want := string(appendUint(nil, u)), strconv.FormatUint(u, 10); got != want {
			t.Fatalf("appendUint(%d) = %s, want %s", u, got, want)
		}
	}
	for _, v := range []int64{0, 1, 9, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, -1} {
		check(v)
	}
	for p := int64(1); p <= 1e18; p *= 10 {
		for _, v := range []int64{p - 1, p, p + 1, -p + 1, -p, -p - 1} {
			check(v)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200_000 {
		check(int64(r.Uint64() >> r.IntN(64)))
	}
	if got := string(appendUint(nil, math.MaxUint64)); got != "18446744073709551615" {
		t.Fatalf("appendUint(MaxUint64) = %s", got)
	}
}
