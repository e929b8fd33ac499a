package mergeinsert

import (
	"fmt"
	"io"

	"github.com/quiver-ingest/quiver/bench"
)

// result is one target's merges: the first (Quiver: cold key index) and
// the later ones (warm). RSS figures are bytes, -1 when not measured
// (LanceDB runs in node).
type result struct {
	target           string
	cold             float64
	warm             []float64
	coldRSS, warmRSS int64 // warmRSS: the largest over the warm merges
}

// add records merge i (0 is the first).
func (r *result) add(i int, rate float64, rss int64) {
	if i == 0 {
		r.cold, r.coldRSS = rate, rss
		return
	}
	r.warm = append(r.warm, rate)
	r.warmRSS = max(r.warmRSS, rss)
}

// warmRate is the median of the warm merges, 0 without any.
func (r result) warmRate() float64 {
	if len(r.warm) == 0 {
		return 0
	}
	return bench.Median(r.warm)
}

// report prints one line per target and merge phase, with Quiver's
// ratios to each LanceDB target in the same phase.
func report(w io.Writer, o Options, rs []result) error {
	fmt.Fprintf(w, "merge-insert of %d source rows (%d updates, %d inserts) into %d rows, on [id], update_all + insert_all; Quiver through Flight\n",
		o.SourceRows, o.SourceRows/2, o.SourceRows-o.SourceRows/2, o.BaseRows)
	tw := bench.NewTable(w)
	fmt.Fprint(tw, "target\tmerges\trows/s\tpeak RSS MiB\t")
	for _, l := range rs[1:] {
		fmt.Fprintf(tw, "× %s\t", l.target)
	}
	fmt.Fprintln(tw)
	line := func(r result, phase string, rate float64, rss int64) {
		mib := "-"
		if rss >= 0 {
			mib = fmt.Sprint(rss >> 20)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t", r.target, phase, rate, mib)
		for _, l := range rs[1:] {
			ratio := ""
			if r.target == "quiver" {
				other := l.cold
				if phase != "first" {
					other = l.warmRate()
				}
				ratio = fmt.Sprintf("%.2fx", rate/other)
			}
			fmt.Fprintf(tw, "%s\t", ratio)
		}
		fmt.Fprintln(tw)
	}
	for _, r := range rs {
		line(r, "first", r.cold, r.coldRSS)
		if len(r.warm) > 0 {
			line(r, fmt.Sprintf("later (median of %d)", len(r.warm)), r.warmRate(), r.warmRSS)
		}
	}
	return tw.Flush()
}
