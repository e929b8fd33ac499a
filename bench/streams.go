package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseStreams parses a --streams comma list such as "1,4" into stream
// counts, in order. Spaces around each count are allowed; every count must
// be a positive integer, else the error reads `--streams "list": give
// positive integers`, for the command to prefix with its name.
func ParseStreams(list string) ([]int, error) {
	var out []int
	for s := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--streams %q: give positive integers", list)
		}
		out = append(out, n)
	}
	return out, nil
}
