package bench

import (
	"cmp"
	"slices"
)

// MedianBy returns the element of xs whose key is the median: the upper
// middle one for an even count, so a figure is always a measured run.
// Equal keys keep their order. xs is not modified; it must not be empty.
func MedianBy[T any](xs []T, key func(T) float64) T {
	s := slices.Clone(xs)
	slices.SortStableFunc(s, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return s[len(s)/2]
}

// Median returns the median of xs as MedianBy does.
func Median(xs []float64) float64 {
	return MedianBy(xs, func(x float64) float64 { return x })
}
