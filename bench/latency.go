package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of ds by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it. It sorts ds in place; an empty ds gives 0.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(math.Ceil(float64(len(ds))*p/100)) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}
