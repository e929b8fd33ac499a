package mergeinsert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/bench/workload"
	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// endpoint is the merge_insert endpoint the scenario serves.
const endpoint = "merged"

// quiverMerges serves dataset through a merge_insert endpoint (on [id],
// update_all + insert_all) in process and merges every source into it,
// one transaction each.
func quiverMerges(ctx context.Context, dir, dataset string, o Options, log io.Writer) (_ result, err error) {
	srv, err := bench.Start(ctx, dir, filepath.Join(dir, "data"), fmt.Sprintf(
		"  - name: %s\n    sink: lance\n    lance: {dataset_uri: \"file://%s\", mode: merge_insert, on: [id], when_matched: update_all, when_not_matched: insert_all}\n",
		endpoint, dataset))
	if err != nil {
		return result{}, err
	}
	defer func() { err = errors.Join(err, bench.Stop(ctx, srv)) }()
	c, err := quiver.Dial(srv.FlightAddr())
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	r := result{target: "quiver"}
	for i := range 1 + o.WarmMerges {
		m, err := quiverMerge(ctx, c, o, i)
		if err != nil {
			return result{}, fmt.Errorf("quiver merge %d: %w", i+1, err)
		}
		fmt.Fprintf(log, "merge-insert: quiver merge %d: %.0f rows/s (put %v, precommit %v, commit %v), peak RSS %d MiB\n",
			i+1, m.rate, m.put.Round(time.Millisecond), m.precommit.Round(time.Millisecond), m.commit.Round(time.Millisecond), m.peakRSS>>20)
		r.add(i, m.rate, m.peakRSS)
	}
	return r, nil
}

// merge is one measured Quiver merge.
type merge struct {
	rate                   float64 // source rows/s, put to commit
	put, precommit, commit time.Duration
	peakRSS                int64 // bytes, -1 when unknown
}

// quiverMerge sends source round as transaction (quiverbench-merge, round+1)
// and commits it. The clock covers sending, merging and committing; the
// peak RSS is reset once the source is built (so it includes the source,
// the key index and whatever else the process holds, such as heap the Go
// runtime keeps after freeing it).
func quiverMerge(ctx context.Context, c *quiver.Client, o Options, round int) (merge, error) {
	recs, err := workload.MergeSource(memoryAllocator, o.BaseRows, o.SourceRows, round)
	if err != nil {
		return merge{}, err
	}
	defer workload.ReleaseAll(recs)
	rr, err := array.NewRecordReader(workload.Schema(), recs)
	if err != nil {
		return merge{}, err
	}
	defer rr.Release()
	resetErr := bench.ResetPeakRSS()
	var m merge
	start := time.Now()
	tx := c.Txn("quiverbench-merge", int64(round)+1)
	if _, err := tx.Put(ctx, endpoint, rr); err != nil {
		return merge{}, err
	}
	m.put = time.Since(start)
	if _, err := tx.Precommit(ctx); err != nil {
		return merge{}, err
	}
	m.precommit = time.Since(start) - m.put
	st, err := tx.Commit(ctx, nil)
	if err != nil {
		return merge{}, err
	}
	if st.State != quiver.StateCommitted {
		return merge{}, fmt.Errorf("the merge ended %s", st.State)
	}
	elapsed := time.Since(start)
	m.commit = elapsed - m.put - m.precommit
	m.rate = float64(o.SourceRows) / elapsed.Seconds()
	m.peakRSS = -1
	if resetErr == nil {
		m.peakRSS = bench.PeakRSS()
	}
	return m, nil
}
