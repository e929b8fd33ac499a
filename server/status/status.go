// Package status keeps the picture an operator watches (the status page
// at http_listen's /, its JSON at /api/status, `quiver status`): per
// endpoint its sink, target, state, streams, throughput over the last
// 15 minutes, last commits and recent errors; live transactions and their
// age; version, uptime and memory.
//
// It owns no state of the server: a Board is fed by what exists — the
// endpoint writers' observers (Recorder), their health, the coordinator's
// live transactions and the Prometheus registry (rows, bytes, streams,
// buffered bytes) — and keeps only what those forget: the throughput
// history, the last commits and the errors of the last hour.
package status

import (
	"context"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quiver-ingest/quiver/internal/redact"
	"github.com/quiver-ingest/quiver/txn"
)

// Defaults of Options.
const (
	DefaultSampleEvery = 10 * time.Second
	DefaultWindow      = 15 * time.Minute
	DefaultStuckAfter  = 5 * time.Minute
)

// Endpoint is one endpoint as the board sees it.
type Endpoint struct {
	Name, Sink, Mode string
	// Target is what it writes, without credentials (writers.TargetOf).
	Target string
	// Reason is why the endpoint cannot serve, nil while it can.
	Reason func() error
	// Recorder is the endpoint writer's observer.
	Recorder *Recorder
	// Continuous lists the endpoint's open continuous streams; nil when
	// it takes none.
	Continuous func() []ContinuousStream
}

// ContinuousStream is one open continuous stream (docs/flight.md,
// "Continuous streams").
type ContinuousStream struct {
	Writer string `json:"writer"`
	// DurableSeq is the writer's durable seq, LastSeq the seq of the
	// stream's last batch (nil: none).
	DurableSeq *int64 `json:"durable_seq"`
	LastSeq    *int64 `json:"last_seq"`
	// LagSeconds is how long its oldest rows not yet durable have waited
	// (0: all are).
	LagSeconds float64 `json:"lag_seconds"`
}

// Options configure a Board. Zero values are documented per field.
type Options struct {
	Version string
	// Flight describes the Flight listener ("127.0.0.1:8815 (tls)").
	Flight string
	// Started is when the server started.
	Started   time.Time
	Endpoints []Endpoint
	// Gatherer is the server's registry, read for the per-endpoint
	// counters of flightsvc (quiver_rows_total, quiver_bytes_total,
	// quiver_streams_active, quiver_buffered_bytes) and the memory
	// budget's gauges (quiver_memory_bytes, quiver_memory_limit_bytes).
	Gatherer prometheus.Gatherer
	// Transactions lists the live transactions (txn.Coordinator.Live).
	Transactions func() []txn.Status
	// Journal is the journal's health (txn.Coordinator.JournalHealth).
	Journal func() error
	// Serving reports whether the server takes calls.
	Serving func() bool
	// SampleEvery is the throughput chart's resolution; zero means 10 s.
	SampleEvery time.Duration
	// Window is how far the chart reaches back; zero means 15 min.
	Window time.Duration
	// StuckAfter: a transaction precommitted longer is flagged stuck; zero
	// means 5 min.
	StuckAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Board builds Status snapshots. Its methods are safe for concurrent use.
type Board struct {
	opts    Options
	sampler *sampler
}

// New returns a board; Run samples throughput until its context ends.
func New(opts Options) *Board {
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = DefaultSampleEvery
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = DefaultStuckAfter
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	names := make([]string, len(opts.Endpoints))
	for i, e := range opts.Endpoints {
		names[i] = e.Name
	}
	return &Board{opts: opts, sampler: newSampler(names, int(opts.Window/opts.SampleEvery))}
}

// Run samples the throughput every SampleEvery until ctx ends.
func (b *Board) Run(ctx context.Context) {
	t := time.NewTicker(b.opts.SampleEvery)
	defer t.Stop()
	b.sampler.add(b.opts.Now(), b.counters())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.sampler.add(b.opts.Now(), b.counters())
		}
	}
}

// Status is the picture at one instant (the JSON of /api/status).
type Status struct {
	Version       string        `json:"version"`
	Flight        string        `json:"flight"`
	State         string        `json:"state"` // serving, or not serving (starting or shutting down)
	Now           time.Time     `json:"now"`
	StartedAt     time.Time     `json:"started_at"`
	UptimeSeconds float64       `json:"uptime_seconds"`
	Journal       string        `json:"journal"` // "ok" or why it cannot write
	Memory        Memory        `json:"memory"`
	SampleSeconds float64       `json:"sample_seconds"` // the throughput points' spacing
	StuckSeconds  float64       `json:"stuck_seconds"`  // precommitted longer: stuck
	Endpoints     []EndpointSt  `json:"endpoints"`
	Transactions  []Transaction `json:"transactions"`
}

// Memory is the process's memory use against its budget.
type Memory struct {
	// HeapBytes is the live Go heap; ProcessBytes all memory the Go
	// runtime holds from the OS (runtime.MemStats.Sys).
	HeapBytes    uint64 `json:"heap_bytes"`
	ProcessBytes uint64 `json:"process_bytes"`
	// BufferedBytes are the Arrow bytes in flight of every endpoint.
	BufferedBytes int64 `json:"buffered_bytes"`
	// ChargedBytes are the bytes charged to the memory budget
	// (quiver_memory_bytes), BudgetBytes the budget
	// (quiver_memory_limit_bytes); both 0 without one.
	ChargedBytes int64 `json:"charged_bytes"`
	BudgetBytes  int64 `json:"budget_bytes"`
}

// EndpointSt is one endpoint's state.
type EndpointSt struct {
	Name    string `json:"name"`
	Sink    string `json:"sink"`
	Mode    string `json:"mode"`
	Target  string `json:"target"`
	State   string `json:"state"` // ok or degraded
	Reason  string `json:"reason,omitempty"`
	Streams int64  `json:"streams"`
	// Rows and Bytes received since the server started.
	Rows          int64        `json:"rows"`
	Bytes         int64        `json:"bytes"`
	BufferedBytes int64        `json:"buffered_bytes"`
	Throughput    []Point      `json:"throughput"` // oldest first
	Commits       []CommitView `json:"commits"`    // newest first
	Errors        []ErrorView  `json:"errors"`     // of the last hour, newest first
	ErrorsHour    int          `json:"errors_last_hour"`
	// Continuous are the open continuous streams, by writer (omitted for
	// endpoints that take none).
	Continuous []ContinuousStream `json:"continuous_streams,omitempty"`
}

// Point is the throughput over one sample interval ending at At.
type Point struct {
	At          time.Time `json:"at"`
	RowsPerSec  float64   `json:"rows_per_sec"`
	BytesPerSec float64   `json:"bytes_per_sec"`
}

// Transaction is one open or precommitted transaction.
type Transaction struct {
	Writer    string    `json:"writer"`
	Epoch     int64     `json:"epoch"`
	State     string    `json:"state"`
	Since     time.Time `json:"since"`
	AgeSecs   float64   `json:"age_seconds"`
	Deadline  time.Time `json:"deadline"`
	Endpoints []string  `json:"endpoints"`
	Rows      int64     `json:"rows"`
	// Stuck: precommitted for longer than StuckAfter.
	Stuck bool `json:"stuck"`
}

// View is what one reader of the status may see.
type View struct {
	// Endpoint allows the endpoints shown, and the transactions touching
	// no other; nil allows all.
	Endpoint func(endpoint string) bool
	// Txn allows the transactions shown (their owner's and admins'
	// tokens, txn.Caller.Sees); nil allows all.
	Txn func(txn.Status) bool
}

// Snapshot is the status now, as v may see it.
func (b *Board) Snapshot(v View) Status {
	visible := v.Endpoint
	if visible == nil {
		visible = func(string) bool { return true }
	}
	now := b.opts.Now()
	c := b.counters()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := Status{
		Version:       b.opts.Version,
		Flight:        b.opts.Flight,
		State:         "serving",
		Now:           now,
		StartedAt:     b.opts.Started,
		UptimeSeconds: now.Sub(b.opts.Started).Seconds(),
		Journal:       "ok",
		Memory:        Memory{HeapBytes: ms.HeapAlloc, ProcessBytes: ms.Sys, ChargedBytes: c[""].charged, BudgetBytes: c[""].limit},
		SampleSeconds: b.opts.SampleEvery.Seconds(),
		StuckSeconds:  b.opts.StuckAfter.Seconds(),
		Endpoints:     []EndpointSt{},
		Transactions:  []Transaction{},
	}
	if b.opts.Serving != nil && !b.opts.Serving() {
		st.State = "not serving"
	}
	if b.opts.Journal != nil {
		if err := b.opts.Journal(); err != nil {
			st.Journal = redact.Text(err.Error())
		}
	}
	for _, e := range b.opts.Endpoints {
		ec := c[e.Name]
		st.Memory.BufferedBytes += ec.buffered
		if !visible(e.Name) {
			continue
		}
		es := EndpointSt{
			Name: e.Name, Sink: e.Sink, Mode: e.Mode, Target: e.Target, State: "ok",
			Streams: ec.streams, Rows: ec.rows, Bytes: ec.bytes, BufferedBytes: ec.buffered,
			Throughput: b.sampler.points(e.Name),
		}
		if e.Reason != nil {
			if err := e.Reason(); err != nil {
				es.State, es.Reason = "degraded", redact.Text(err.Error())
			}
		}
		if e.Recorder != nil {
			es.Commits, es.Errors, es.ErrorsHour = e.Recorder.view(now)
		}
		if e.Continuous != nil {
			es.Continuous = e.Continuous()
		}
		st.Endpoints = append(st.Endpoints, es)
	}
	if b.opts.Transactions != nil {
		for _, t := range b.opts.Transactions() {
			if v.Txn != nil && !v.Txn(t) {
				continue
			}
			if tv, ok := b.transaction(t, now, visible); ok {
				st.Transactions = append(st.Transactions, tv)
			}
		}
	}
	return st
}

// transaction describes t, unless it touches an endpoint not visible.
func (b *Board) transaction(t txn.Status, now time.Time, visible func(string) bool) (Transaction, bool) {
	tv := Transaction{Writer: t.Writer, Epoch: t.Epoch, State: string(t.State), Since: t.Since, Deadline: t.Deadline, Endpoints: []string{}}
	for _, p := range t.Participants {
		if !visible(p.Endpoint) {
			return Transaction{}, false
		}
		tv.Endpoints = append(tv.Endpoints, p.Endpoint)
		tv.Rows += p.Rows
	}
	if !t.Since.IsZero() {
		tv.AgeSecs = now.Sub(t.Since).Seconds()
	}
	tv.Stuck = t.State == txn.StatePrecommitted && tv.AgeSecs > b.opts.StuckAfter.Seconds()
	return tv, true
}

// counts are one endpoint's flightsvc metrics; under the endpoint ""
// (metrics without the label), the memory budget's gauges.
type counts struct {
	rows, bytes, streams, buffered int64
	charged, limit                 int64 // quiver_memory_bytes (all kinds), quiver_memory_limit_bytes
}

// counters reads the per-endpoint metrics from the registry; a failed
// gather (a collector error) reads what it got.
func (b *Board) counters() map[string]counts {
	out := make(map[string]counts, len(b.opts.Endpoints))
	if b.opts.Gatherer == nil {
		return out
	}
	mfs, _ := b.opts.Gatherer.Gather()
	for _, mf := range mfs {
		var set func(*counts, int64)
		switch mf.GetName() {
		case "quiver_rows_total":
			set = func(c *counts, v int64) { c.rows = v }
		case "quiver_bytes_total":
			set = func(c *counts, v int64) { c.bytes = v }
		case "quiver_streams_active":
			set = func(c *counts, v int64) { c.streams = v }
		case "quiver_buffered_bytes":
			set = func(c *counts, v int64) { c.buffered = v }
		case "quiver_memory_bytes": // one series per kind
			set = func(c *counts, v int64) { c.charged += v }
		case "quiver_memory_limit_bytes":
			set = func(c *counts, v int64) { c.limit = v }
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			ep := label(m, "endpoint")
			c := out[ep]
			set(&c, int64(value(m)))
			out[ep] = c
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	i := slices.IndexFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == name })
	if i < 0 {
		return ""
	}
	return m.GetLabel()[i].GetValue()
}

func value(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}
