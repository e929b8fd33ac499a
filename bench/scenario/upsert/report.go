package upsert

import (
	"fmt"
	"io"

	"github.com/quiver-ingest/quiver/bench"
)

// row is one line of the report: a Quiver mode's median run, or LanceDB
// (rowsPerSec alone).
type row struct {
	target string
	run    run
	runs   int // 0 for LanceDB
}

// report prints the scenario and one line per target; with LanceDB rows,
// each Quiver mode's ratio to the first of them (mergeInsert without an
// index).
func report(w io.Writer, o Options, rows []row) error {
	fmt.Fprintf(w, "upsert of %d changelog rows (%d updates spread over the table, %d inserts) into %d rows, merge_keys [id], %s, through Flight; median of %d runs\n",
		o.ChangeRows, o.ChangeRows/2, o.ChangeRows-o.ChangeRows/2, o.TableRows, o.Codec, o.Runs)
	var lance float64
	for _, r := range rows {
		if r.runs == 0 && lance == 0 {
			lance = r.run.rowsPerSec
		}
	}
	tw := bench.NewTable(w)
	fmt.Fprintln(tw, "target\trows/s\tseconds\tfiles rewritten\tfiles marked\tfiles added\tMiB added\tpeak RSS MiB\tvs LanceDB\t")
	for _, r := range rows {
		if r.runs == 0 {
			fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t\t\t\t\t\t\t\n", r.target, r.run.rowsPerSec, r.run.seconds)
			continue
		}
		rss := "?"
		if r.run.peakRSS >= 0 {
			rss = fmt.Sprintf("%.0f", float64(r.run.peakRSS)/(1<<20))
			if r.run.peakRSSSinceStart {
				rss += " (since start)"
			}
		}
		ratio := ""
		if lance > 0 {
			ratio = fmt.Sprintf("%.2f×", r.run.rowsPerSec/lance)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%d\t%d\t%d\t%.1f\t%s\t%s\t\n", r.target, r.run.rowsPerSec, r.run.seconds,
			r.run.rewritten, r.run.marked, r.run.added, float64(r.run.addedBytes)/(1<<20), rss, ratio)
	}
	return tw.Flush()
}
