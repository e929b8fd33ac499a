package e2e

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/emulator"
)

// BenchmarkScaleOutCommits measures commit contention on one Delta table
// in a moto bucket served by 1, 2 and 3 quiver processes: scaleOutClients
// clients, spread over the servers, commit auto-commit streams of
// scaleOutRows rows as fast as they can, b.N commits in all. It reports
// committed commits and rows per second, the servers' commit conflicts
// and retries per second (a lost put-if-absent race, rebased and retried
// by the server), the puts the client had to send again (Aborted after
// the server's retries), and the p99 commit latency; and it checks that
// every row landed exactly once. Not part of make test:
//
//	go test ./server/e2e -run '^$' -bench ScaleOut -benchtime 60x
//
// moto is slow and the e2e binary is built with -race, so the point is
// the ratio between server counts, not the absolute numbers
// (docs/benchmarks.md).
func BenchmarkScaleOutCommits(b *testing.B) {
	for _, servers := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("servers=%d", servers), func(b *testing.B) { benchScaleOut(b, servers) })
	}
}

const (
	scaleOutClients = 6
	scaleOutRows    = 100
)

func benchScaleOut(b *testing.B, servers int) {
	store := emulator.S3(b)
	tableURI := store.URI(store.Bucket(b), "events")
	procs := make([]*proc, servers)
	clients := make([]*quiver.Client, servers)
	for i := range servers {
		procs[i] = startQuiver(b, writeConfig(b, b.TempDir(), deltaAppend(tableURI)), store.Env()...)
		clients[i] = dial(b, procs[i])
	}
	ctx := ctxT(b)
	// The table's creation is not what is measured.
	if _, err := clients[0].Put(ctx, deltaEndpoint, idRows(b, 0, scaleOutRows)); err != nil {
		b.Fatal(err)
	}
	var (
		next      atomic.Int64 // commits handed out
		resent    atomic.Int64
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
		failed    error
	)
	n := int64(b.N)
	b.ResetTimer()
	start := time.Now()
	for w := range scaleOutClients {
		c := clients[w%servers]
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > n {
					return
				}
				t0 := time.Now()
				for {
					_, err := c.Put(ctx, deltaEndpoint, idRows(b, i*scaleOutRows, scaleOutRows))
					if status.Code(err) == codes.Aborted { // nothing published: send again
						resent.Add(1)
						continue
					}
					if err != nil {
						mu.Lock()
						failed = err
						mu.Unlock()
						return
					}
					break
				}
				mu.Lock()
				latencies = append(latencies, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	var conflicts, retries float64
	for _, p := range procs {
		conflicts += max(0, p.metric(b, `quiver_delta_commit_conflicts_total{endpoint="events"}`))
		retries += max(0, p.metric(b, `quiver_delta_commit_retries_total{endpoint="events"}`))
	}
	slices.Sort(latencies)
	secs := elapsed.Seconds()
	b.ReportMetric(float64(n)/secs, "commits/s")
	b.ReportMetric(float64(n*scaleOutRows)/secs, "rows/s")
	b.ReportMetric(conflicts/secs, "conflicts/s")
	b.ReportMetric(retries/secs, "retries/s")
	b.ReportMetric(float64(resent.Load())/secs, "resent/s")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Milliseconds()), "p99-ms")
	b.ReportMetric(0, "ns/op")
	readDelta(b, tableURI).wantIDs(b, (n+1)*scaleOutRows)
}
