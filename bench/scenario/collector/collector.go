// Package collector is the collector scenario of quiverbench: a fleet of
// long-lived streams sending small batches at a steady pace into one Delta
// append endpoint, the traffic continuous streams (docs/flight.md,
// "Continuous streams") are built for, against today's alternative, one
// auto-commit put per batch, on the same load:
//
//	go run ./bench/cmd/quiverbench --scenario collector --streams 100 --batch-rows 1000 --every 100ms --duration 20s --commit-interval 1s
//
// It starts one Quiver server in process with a Delta append endpoint on
// a file:// table (stream.commit_interval from --commit-interval) and, for
// the comparison, another one written by auto-commit puts. Each client
// sends one batch every --every (a ticker: a client held back by the
// server skips ticks, so a server that cannot keep up shows as a
// sustained rate below the offered one). It reports, per kind of put: the
// offered and sustained rows/s, the latency from sending a batch to the
// answer that it is durable (P50, P99), the table versions per second and
// per commit interval, the rows per data file, and the process's peak RSS
// against the memory budget.
//
// The tables live in a temporary folder removed at exit (--keep keeps it;
// --dir names it, so that a reader such as delta-rs can poll the table
// while the scenario runs: make bench-collector does).
package collector

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/bench"
	"github.com/quiver-ingest/quiver/bench/workload"
	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/emulator"
	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// Options are the scenario's flags.
type Options struct {
	streams        int
	batchRows      int
	every          time.Duration
	duration       time.Duration
	commitInterval time.Duration
	maxMessage     int64
	kinds          string
	store          string
	servers        int
	dir            string
	keep           bool
}

// Register adds the scenario's flags to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.IntVar(&o.streams, "streams", 100, "clients, each one long-lived stream (or one auto-commit put per batch)")
	fs.IntVar(&o.batchRows, "batch-rows", 1000, "rows per batch")
	fs.DurationVar(&o.every, "every", 100*time.Millisecond, "each client sends one batch this often")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "how long the clients send")
	fs.DurationVar(&o.commitInterval, "commit-interval", time.Second, "stream.commit_interval of the continuous streams' endpoint")
	fs.Int64Var(&o.maxMessage, "max-message-bytes", 4<<20, "limits.max_message_bytes: every open stream reserves this (plus 1 MiB) of its endpoint's memory share while it waits for its next message, so many streams need it small")
	fs.StringVar(&o.store, "store", "file", "where the tables live: file (a local folder) or s3 (moto, from .venv: make venv)")
	fs.IntVar(&o.servers, "servers", 1, "Quiver servers serving the same tables, each committing its own streams once per interval; clients spread over them")
	fs.StringVar(&o.kinds, "kinds", "stream,auto", "which puts to measure: stream (continuous streams), auto (one auto-commit put per batch)")
	fs.StringVar(&o.dir, "dir", "", "folder for the tables and the journal (default: a temporary folder)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary folder")
}

// Scenario is the collector scenario for bench.Main.
func Scenario() bench.Scenario {
	return bench.NewScenario[Options]("collector", "long-lived streams of small batches into Delta: continuous streams vs auto-commit puts", run)
}

// result is one kind of put's measurement.
type result struct {
	kind               string
	durable            int64   // rows the clients were answered durable
	offered, sustained float64 // rows/s
	p50, p99           time.Duration
	versions           int64
	seconds            float64 // from the first send to the last durable answer
	files, rows        int64
	peakRSS            int64
}

func run(ctx context.Context, o Options, out, log io.Writer) (err error) {
	if o.streams < 1 || o.batchRows < 1 || o.every <= 0 || o.duration <= 0 || o.servers < 1 {
		return errors.New("collector: --streams, --batch-rows, --every, --duration and --servers must be positive")
	}
	dir := o.dir
	if dir == "" {
		var remove func()
		if dir, remove, err = bench.TempDir("quiverbench-collector", "tables", o.keep, log); err != nil {
			return err
		}
		defer remove()
	}
	uri, stop, err := tables(ctx, o.store, dir)
	if err != nil {
		return err
	}
	defer stop()
	endpoints := fmt.Sprintf("  - name: stream\n    sink: delta\n    delta: {table_uri: %q}\n    stream: {commit_interval: %s}\n  - name: auto\n    sink: delta\n    delta: {table_uri: %q}\n",
		uri("stream"), o.commitInterval, uri("auto"))
	addrs := make([]string, o.servers)
	for i := range o.servers {
		srv, err := bench.StartWith(ctx, dir, filepath.Join(dir, fmt.Sprint("data", i)), fmt.Sprintf("limits: {max_message_bytes: %d}\n", o.maxMessage), endpoints)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, bench.Stop(ctx, srv)) }()
		addrs[i] = srv.FlightAddr()
	}

	batches, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, int64(o.batchRows), o.batchRows)
	if err != nil {
		return err
	}
	defer workload.ReleaseAll(batches)
	batch := batches[0]

	var results []result
	for _, kind := range strings.Split(o.kinds, ",") {
		bench.ResetPeakRSS()
		var r result
		switch kind {
		case "stream":
			r, err = runStreams(ctx, addrs, batch, o, log)
		case "auto":
			r, err = runPuts(ctx, addrs, batch, o, log)
		default:
			return fmt.Errorf("collector: --kinds: unknown kind %q (stream, auto)", kind)
		}
		if err != nil {
			return fmt.Errorf("collector: %s: %w", kind, err)
		}
		r.peakRSS = bench.PeakRSS()
		if r.versions, r.files, r.rows, err = tableStats(ctx, uri(kind)); err != nil {
			return err
		}
		if r.rows != r.durable {
			return fmt.Errorf("collector: %s: the table holds %d rows, the clients were answered %d durable: rows lost or doubled", kind, r.rows, r.durable)
		}
		results = append(results, r)
	}
	return report(out, o, results)
}

// tables returns where the table of each kind of put lives: under dir, or
// in a fresh bucket of moto started here (stopped by stop).
func tables(ctx context.Context, store, dir string) (uri func(kind string) string, stop func(), err error) {
	switch store {
	case "file":
		return func(kind string) string { return "file://" + filepath.Join(dir, kind) }, func() {}, nil
	case "s3":
		s3, err := emulator.StartS3()
		if err != nil {
			return nil, nil, fmt.Errorf("collector: start moto: %w", err)
		}
		// gocloud reads the credentials from the environment.
		for _, kv := range s3.Env() {
			k, v, _ := strings.Cut(kv, "=")
			if err := os.Setenv(k, v); err != nil {
				s3.Stop()
				return nil, nil, err
			}
		}
		bucket, err := s3.NewBucket(ctx)
		if err != nil {
			s3.Stop()
			return nil, nil, err
		}
		return func(kind string) string { return s3.URI(bucket, kind) }, func() { s3.Stop() }, nil
	}
	return nil, nil, fmt.Errorf("collector: --store %q: use file or s3", store)
}

// clientLoad is what every client of a kind does: send the batch every
// o.every for o.duration, recording when each batch was sent and when it
// was answered durable.
type clientLoad struct {
	mu        sync.Mutex
	latencies []time.Duration
	rows      int64
	first     time.Time
	last      time.Time // the last durable answer
}

func (l *clientLoad) durable(sent time.Time, rows int64) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latencies = append(l.latencies, now.Sub(sent))
	l.rows += rows
	if now.After(l.last) {
		l.last = now
	}
}

func (l *clientLoad) result(kind string, o Options) result {
	r := result{kind: kind, offered: float64(o.streams*o.batchRows) / o.every.Seconds(), durable: l.rows}
	r.seconds = l.last.Sub(l.first).Seconds()
	if r.seconds > 0 {
		r.sustained = float64(l.rows) / r.seconds
	}
	r.p50, r.p99 = bench.Percentile(l.latencies, 50), bench.Percentile(l.latencies, 99)
	return r
}

// paced calls send every o.every until o.duration has passed since
// start; a send that takes longer skips the ticks it missed.
func paced(ctx context.Context, start time.Time, o Options, send func(seq int64) error) error {
	tick := time.NewTicker(o.every)
	defer tick.Stop()
	for seq := int64(0); time.Since(start) < o.duration; seq++ {
		if err := send(seq); err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// runStreams runs o.streams continuous streams, in plain Flight, each on
// a connection of its own like a fleet of collectors.
func runStreams(ctx context.Context, addrs []string, batch arrow.RecordBatch, o Options, log io.Writer) (result, error) {
	load := &clientLoad{first: time.Now()}
	errs := make([]error, o.streams)
	var wg sync.WaitGroup
	for i := range o.streams {
		wg.Go(func() {
			conn, err := grpc.NewClient(addrs[i%len(addrs)], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close()
			errs[i] = oneStream(ctx, conn, fmt.Sprintf("collector-%d", i), batch, o, load)
		})
	}
	wg.Wait()
	fmt.Fprintf(log, "collector: %d continuous streams done: %d rows durable, the last %s after the first send\n", o.streams, load.rows, load.last.Sub(load.first).Round(time.Millisecond))
	return load.result("stream", o), errors.Join(errs...)
}

// oneStream is one collector's continuous stream.
func oneStream(ctx context.Context, conn *grpc.ClientConn, writer string, batch arrow.RecordBatch, o Options, load *clientLoad) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := flight.NewClientFromConn(conn, nil).DoPut(ctx)
	if err != nil {
		return err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(batch.Schema()))
	defer w.Close()
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: fmt.Appendf(nil, `{"endpoint":"stream","writer":%q,"stream":true}`, writer)})
	empty := batch.NewSlice(0, 0)
	err = w.Write(empty)
	empty.Release()
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		sent []time.Time // by seq
	)
	answered := make(chan error, 1)
	go func() {
		next := int64(0) // the first seq not answered durable yet
		for {
			res, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				answered <- err
				return
			}
			var a struct {
				DurableSeq *int64 `json:"durable_seq"`
			}
			if err := json.Unmarshal(res.GetAppMetadata(), &a); err != nil {
				answered <- err
				return
			}
			if a.DurableSeq == nil {
				continue
			}
			mu.Lock()
			for ; next <= *a.DurableSeq && next < int64(len(sent)); next++ {
				load.durable(sent[next], batch.NumRows())
			}
			mu.Unlock()
		}
	}()
	err = paced(ctx, load.first, o, func(seq int64) error {
		mu.Lock()
		sent = append(sent, time.Now())
		mu.Unlock()
		return w.WriteWithAppMetadata(batch, fmt.Appendf(nil, `{"seq":%d}`, seq))
	})
	if err == nil {
		err = stream.CloseSend()
	}
	if err != nil {
		cancel()
		<-answered
		return err
	}
	return <-answered
}

// runPuts runs o.streams clients each doing one auto-commit put per batch,
// on one connection per server.
func runPuts(ctx context.Context, addrs []string, batch arrow.RecordBatch, o Options, log io.Writer) (result, error) {
	clients := make([]*quiver.Client, len(addrs))
	for i, addr := range addrs {
		c, err := quiver.Dial(addr)
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		clients[i] = c
	}
	load := &clientLoad{first: time.Now()}
	errs := make([]error, o.streams)
	var wg sync.WaitGroup
	for i := range o.streams {
		c := clients[i%len(clients)]
		wg.Go(func() {
			errs[i] = paced(ctx, load.first, o, func(int64) error {
				sent := time.Now()
				for {
					err := putOnce(ctx, c, batch)
					if status.Code(err) == codes.Aborted { // lost the commit race: nothing published, send again
						continue
					}
					if err != nil {
						return err
					}
					load.durable(sent, batch.NumRows())
					return nil
				}
			})
		})
	}
	wg.Wait()
	fmt.Fprintf(log, "collector: %d auto-commit put clients done\n", o.streams)
	return load.result("auto", o), errors.Join(errs...)
}

// putOnce sends batch as one auto-commit put.
func putOnce(ctx context.Context, c *quiver.Client, batch arrow.RecordBatch) error {
	rdr, err := array.NewRecordReader(batch.Schema(), []arrow.RecordBatch{batch})
	if err != nil {
		return err
	}
	defer rdr.Release()
	_, err = c.Put(ctx, "auto", rdr)
	return err
}

// tableStats reads the Delta table at uri: its versions, data files and
// rows.
func tableStats(ctx context.Context, uri string) (versions, files, rows int64, err error) {
	b, err := storage.Open(ctx, uri, storage.Options{})
	if err != nil {
		return 0, 0, 0, err
	}
	defer b.Close()
	snap, err := deltalog.Load(ctx, b)
	if err != nil {
		return 0, 0, 0, err
	}
	n, _ := snap.NumRecords()
	return snap.Version + 1, int64(len(snap.Files())), int64(n), nil
}

// report prints one line per kind of put.
func report(w io.Writer, o Options, rs []result) error {
	fmt.Fprintf(w, "%d clients x %d-row batches every %s for %s (offered %.0f rows/s) to %d server(s) on %s; continuous streams' commit_interval %s\n",
		o.streams, o.batchRows, o.every, o.duration, float64(o.streams*o.batchRows)/o.every.Seconds(), o.servers, o.store, o.commitInterval)
	tw := bench.NewTable(w)
	fmt.Fprintln(tw, "put\tsustained rows/s\tvs offered\tdurable P50\tP99\tversions/s\tversions/interval/server\trows/file\tpeak RSS MiB\t")
	for _, r := range rs {
		perSec := float64(r.versions) / r.seconds
		perFile := 0.0
		if r.files > 0 {
			perFile = float64(r.rows) / float64(r.files)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%s\t%s\t%.1f\t%.2f\t%.0f\t%d\t\n", r.kind, r.sustained, r.sustained/r.offered,
			r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), perSec, perSec*o.commitInterval.Seconds()/float64(o.servers), perFile, r.peakRSS>>20)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "peak RSS: the whole process (server and clients); limits.memory_bytes = %d MiB\n", config.Default().Limits.MemoryBytes>>20)
	return err
}
