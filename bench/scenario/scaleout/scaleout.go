// Package scaleout is the scale-out scenario of quiverbench: commit
// contention between several Quiver servers on one Delta table in object
// storage. It starts moto, the S3 emulator (from the project's .venv:
// make venv), and for each server count 1, 2 and 3 Quiver servers in
// process (data_dirs of their own) serving one Delta append endpoint on a
// fresh bucket; --clients clients spread over the servers send
// auto-commit puts of --rows rows as fast as they can, --commits in all,
// each commit racing the others for the next log version through S3's
// conditional writes. It reports committed commits and rows per second,
// the servers' commit conflicts and retries per second (a lost
// put-if-absent race, rebased and retried by the server), the puts a
// client had to send again (Aborted: nothing published), the p99 commit
// latency and the ratio of commits/s to one server; and it checks every
// run's table: one version per commit and the rows of every commit in
// total (a lost commit and a doubled one would cancel out there; the e2e
// test TestScaleOutOnS3 checks rows by id).
//
//	go run ./bench/cmd/quiverbench --scenario scale-out --servers 1,2,3 --commits 60 --runs 3
//
// moto serves one request at a time and the machine is shared, so the
// point is the ratio between server counts, not absolute speed
// (docs/benchmarks.md).
package scaleout

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/bench"
	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/emulator"
	"github.com/quiver-ingest/quiver/server"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// endpoint is the Delta append endpoint every server serves.
const endpoint = "events"

// Options are the scenario's flags.
type Options struct {
	servers []int
	clients int
	commits int
	rows    int64
	runs    int
}

// Register adds --servers, --clients, --commits, --rows and --runs to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	o.servers = []int{1, 2, 3}
	bench.IntsVar(fs, &o.servers, "servers", "server counts, a comma list runs each (e.g. 1,2,3)")
	fs.IntVar(&o.clients, "clients", 6, "concurrent clients, spread over the servers")
	fs.IntVar(&o.commits, "commits", 60, "auto-commit puts per run")
	fs.Int64Var(&o.rows, "rows", 100, "rows per put")
	fs.IntVar(&o.runs, "runs", 3, "runs per server count; the median (by commits/s) is reported")
}

func (o Options) validate() error {
	if len(o.servers) == 0 || slices.Min(o.servers) <= 0 {
		return fmt.Errorf("--servers %v: give positive server counts", o.servers)
	}
	if o.clients <= 0 || o.commits <= 0 || o.rows <= 0 || o.runs <= 0 {
		return errors.New("--clients, --commits, --rows and --runs must be positive")
	}
	return nil
}

// Scenario is the scale-out scenario for bench.Main.
func Scenario() bench.Scenario {
	return bench.NewScenario[Options]("scale-out", "commit contention: 1, 2, 3 servers appending to one Delta table on moto (S3)", run)
}

// result is one run at one server count.
type result struct {
	servers                                      int
	commitsPerSec, rowsPerSec                    float64
	conflictsPerSec, retriesPerSec, resentPerSec float64
	p99                                          time.Duration
}

func run(ctx context.Context, o Options, out, log io.Writer) (err error) {
	if err := o.validate(); err != nil {
		return fmt.Errorf("scale-out: %w", err)
	}
	s3, err := emulator.StartS3()
	if err != nil {
		return fmt.Errorf("scale-out: start moto: %w", err)
	}
	defer s3.Stop()
	// gocloud reads the credentials from the environment.
	for _, kv := range s3.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "scale-out: load average %s at the start\n", loadAverage())
	var medians []result
	for _, n := range o.servers {
		var runs []result
		for i := range o.runs {
			r, err := once(ctx, s3, n, o)
			if err != nil {
				return fmt.Errorf("scale-out: %d servers, run %d: %w", n, i+1, err)
			}
			fmt.Fprintf(log, "scale-out: %d server(s), run %d: %.1f commits/s, %.1f conflicts/s, p99 %v\n", n, i+1, r.commitsPerSec, r.conflictsPerSec, r.p99)
			runs = append(runs, r)
		}
		medians = append(medians, bench.MedianBy(runs, func(r result) float64 { return r.commitsPerSec }))
	}
	fmt.Fprintf(log, "scale-out: load average %s at the end\n", loadAverage())
	return report(out, medians, o)
}

// once runs the load against servers fresh servers on a fresh bucket.
func once(ctx context.Context, s3 *emulator.Store, servers int, o Options) (res result, err error) {
	bucket, err := s3.NewBucket(ctx)
	if err != nil {
		return res, err
	}
	uri := s3.URI(bucket, endpoint)
	dir, remove, err := bench.TempDir("quiverbench-scaleout", "journals", false, io.Discard)
	if err != nil {
		return res, err
	}
	defer remove()
	srvs := make([]*server.Server, 0, servers)
	defer func() {
		for _, srv := range srvs {
			err = errors.Join(err, bench.Stop(ctx, srv))
		}
	}()
	clients := make([]*quiver.Client, servers)
	for i := range servers {
		srv, err := bench.Start(ctx, dir, filepath.Join(dir, fmt.Sprint("data", i)),
			fmt.Sprintf("  - {name: %s, sink: delta, delta: {table_uri: %q}}\n", endpoint, uri))
		if err != nil {
			return res, err
		}
		srvs = append(srvs, srv)
		if clients[i], err = quiver.Dial(srv.FlightAddr()); err != nil {
			return res, err
		}
		defer clients[i].Close()
	}
	// The table's creation (version 0) is not measured.
	if _, err := clients[0].Put(ctx, endpoint, ids(0, o.rows)); err != nil {
		return res, err
	}

	var (
		next, resent atomic.Int64
		mu           sync.Mutex
		latencies    []time.Duration
		failed       error
		wg           sync.WaitGroup
	)
	start := time.Now()
	for w := range o.clients {
		c := clients[w%servers]
		wg.Go(func() {
			for {
				i := next.Add(1) // commit i holds ids [i*rows, (i+1)*rows)
				if i > int64(o.commits) {
					return
				}
				t0 := time.Now()
				for {
					_, err := c.Put(ctx, endpoint, ids(i*o.rows, o.rows))
					if status.Code(err) == codes.Aborted { // nothing published: send again
						resent.Add(1)
						continue
					}
					mu.Lock()
					if err != nil {
						failed = errors.Join(failed, err)
					} else {
						latencies = append(latencies, time.Since(t0))
					}
					mu.Unlock()
					break
				}
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if failed != nil {
		return res, failed
	}
	var conflicts, retries float64
	for _, srv := range srvs {
		m, err := metrics(ctx, srv.HTTPAddr())
		if err != nil {
			return res, err
		}
		conflicts += m[`quiver_delta_commit_conflicts_total{endpoint="events"}`]
		retries += m[`quiver_delta_commit_retries_total{endpoint="events"}`]
	}
	if err := check(ctx, uri, int64(o.commits), o.rows); err != nil {
		return res, err
	}
	return result{
		servers:         servers,
		commitsPerSec:   float64(o.commits) / secs,
		rowsPerSec:      float64(int64(o.commits)*o.rows) / secs,
		conflictsPerSec: conflicts / secs,
		retriesPerSec:   retries / secs,
		resentPerSec:    float64(resent.Load()) / secs,
		p99:             bench.Percentile(latencies, 99),
	}, nil
}

// ids returns one batch of the ids [from, from+n).
func ids(from, n int64) array.RecordReader {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for id := from; id < from+n; id++ {
		b.Append(id)
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, n)
	defer rec.Release()
	r, _ := array.NewRecordReader(schema, []arrow.RecordBatch{rec}) // one batch of its schema: cannot fail
	return r
}

// check reads the table: one version per commit after the creation, and
// the rows of every commit once (by the files' row counts).
func check(ctx context.Context, uri string, commits, rows int64) error {
	b, err := storage.Open(ctx, uri, storage.Options{})
	if err != nil {
		return err
	}
	defer b.Close()
	snap, err := deltalog.Load(ctx, b)
	if err != nil {
		return err
	}
	got, complete := snap.NumRecords()
	if snap.Version != commits || !complete || got != (commits+1)*rows {
		return fmt.Errorf("table at version %d with %d rows (stats complete: %v), want version %d and %d rows: a commit was lost or doubled",
			snap.Version, got, complete, commits, (commits+1)*rows)
	}
	return nil
}

// metrics returns the samples of a server's /metrics by series
// ("name{labels}"), from its "series value" lines.
func metrics(ctx context.Context, httpAddr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		var v float64
		if ok && !strings.HasPrefix(name, "#") {
			if _, err := fmt.Sscanf(value, "%g", &v); err == nil {
				out[name] = v
			}
		}
	}
	return out, sc.Err()
}

// loadAverage is the first three fields of /proc/loadavg, "?" without it.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

func report(w io.Writer, rs []result, o Options) error {
	fmt.Fprintf(w, "scale-out: %d clients, %d auto-commit puts of %d rows per run, median of %d runs by commits/s\n", o.clients, o.commits, o.rows, o.runs)
	tw := bench.NewTable(w)
	fmt.Fprintln(tw, "servers\tcommits/s\trows/s\tconflicts/s\tretries/s\tresent/s\tp99 commit\tvs 1 server\t")
	var one float64
	for _, r := range rs {
		if r.servers == 1 {
			one = r.commitsPerSec
		}
	}
	for _, r := range rs {
		ratio := "-"
		if one > 0 {
			ratio = fmt.Sprintf("%.2fx", r.commitsPerSec/one)
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%.0f\t%.1f\t%.2f\t%.2f\t%v\t%s\t\n", r.servers, r.commitsPerSec, r.rowsPerSec,
			r.conflictsPerSec, r.retriesPerSec, r.resentPerSec, r.p99.Round(time.Millisecond), ratio)
	}
	return tw.Flush()
}
