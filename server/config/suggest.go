package config

import (
	"fmt"
	"strings"
)

// unknownKey words the problem of an unexpected key, suggesting the
// closest known key when one is near enough to be a typo.
func unknownKey(key string, known []string) string {
	msg := fmt.Sprintf("unknown key %q", key)
	if s := closest(key, known); s != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + " (known keys: " + strings.Join(known, ", ") + ")"
}

// closest returns the candidate within a small edit distance of s (about
// one typo per three letters), or "" when none is.
func closest(s string, candidates []string) string {
	best, bestDist := "", len(s)/3+1
	for _, c := range candidates {
		if d := editDistance(s, c); d <= bestDist && (best == "" || d < editDistance(s, best)) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, counting a swap of
// two adjacent letters as one edit ("lsiten" is one typo away from listen).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
