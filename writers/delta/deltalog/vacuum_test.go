package deltalog

import (
	"math"
	"testing"
	"time"
)

// TestParseInterval: Delta's duration properties as Spark reads them; a
// value that is no interval is refused, never read in part, and a huge one
// saturates instead of turning negative.
func TestParseInterval(t *testing.T) {
	day := 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"interval 7 days":                    7 * day,
		"interval 1 week":                    7 * day,
		"INTERVAL 30 DAYS":                   30 * day,
		"7 days":                             7 * day,
		"interval 1 day 12 hours":            day + 12*time.Hour,
		"interval 90 minutes":                90 * time.Minute,
		"interval 0 seconds":                 0,
		"interval 365000 days":               math.MaxInt64,
		"interval 9223372036854775807 weeks": math.MaxInt64,
	} {
		if got, ok := parseInterval(in); !ok || got != want {
			t.Errorf("parseInterval(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "interval", "interval 7", "interval -1 days", "interval 7 fortnights",
		"interval 1 day 12", "seven days", "interval 1.5 days", "interval 1 day and 2 hours"} {
		if got, ok := parseInterval(in); ok {
			t.Errorf("parseInterval(%q) = %v, ok; want refused", in, got)
		}
	}
}
