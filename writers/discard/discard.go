// Package discard is the discard sink (`sink: discard`): it counts the rows
// it is given and drops them. It is the benchmark baseline and the test
// double of the writer contract.
//
// Committed totals and committed epochs live in memory, in a state shared by
// a writer and its peers ([Writer.Peer]); they vanish with the process.
// Descriptors are self-contained JSON ({"rows":N,"bytes":B,"batches":K}), so
// a descriptor precommitted by one writer can be committed by a peer, as a
// restarted server or a second server would.
//
// The package imports only the writers contract, Arrow and the Prometheus
// client (its committed totals are exported as metrics).
package discard

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quiver-ingest/quiver/writers"
)

// Sink returns the registry entry of the discard sink. It has no settings
// section; every endpoint gets its own, schema-less writer.
func Sink() writers.Sink {
	return writers.Sink{
		Name:      "discard",
		NewConfig: func() writers.SinkConfig { return Config{} },
		New: func(_ writers.SinkConfig, env writers.Env) (writers.Writer, error) {
			w := New(nil)
			if err := w.registerMetrics(env.Registerer); err != nil {
				return nil, err
			}
			return w, nil
		},
	}
}

// Config is the discard sink's (empty) configuration.
type Config struct{}

// Validate accepts the empty configuration.
func (Config) Validate() error { return nil }

// Mode is "": the discard sink has no write modes.
func (Config) Mode() string { return "" }

// Totals counts rows, bytes (util.TotalRecordSize) and batches.
type Totals struct {
	Rows    int64 `json:"rows"`
	Bytes   int64 `json:"bytes"`
	Batches int64 `json:"batches"`
}

func (t *Totals) add(o Totals) {
	t.Rows += o.Rows
	t.Bytes += o.Bytes
	t.Batches += o.Batches
}

// sinkState is what a real sink would keep in its table: what was committed.
type sinkState struct {
	mu        sync.Mutex // guards the following fields
	committed Totals
	epochs    map[string]int64 // writer → last committed epoch
}

// Writer is the discard writer. All methods are safe for concurrent use.
type Writer struct {
	schema  *arrow.Schema
	sink    *sinkState
	metrics *writers.Metrics // nil unless built by Sink

	mu           sync.Mutex // guards the following fields
	staged       map[writers.TxnKey]Totals
	precommitted map[writers.TxnKey]Totals
}

var (
	_ writers.Writer         = (*Writer)(nil)
	_ writers.SchemaReporter = (*Writer)(nil)
)

// New returns a writer over a fresh, empty sink state. A non-nil schema is
// the endpoint's fixed schema: Schema reports it and Write rejects records
// that differ from it with ErrInvalid. With a nil schema every record is
// accepted.
func New(schema *arrow.Schema) *Writer {
	return newWriter(schema, &sinkState{epochs: make(map[string]int64)})
}

func newWriter(schema *arrow.Schema, sink *sinkState) *Writer {
	return &Writer{
		schema:       schema,
		sink:         sink,
		staged:       make(map[writers.TxnKey]Totals),
		precommitted: make(map[writers.TxnKey]Totals),
	}
}

// Peer returns another writer over the same committed state (totals and
// epochs) with nothing staged: what a restarted server, or a second server
// writing the same table, would see.
func (w *Writer) Peer() *Writer { return newWriter(w.schema, w.sink) }

// Committed returns the totals published by every commit so far (shared
// with peers).
func (w *Writer) Committed() Totals {
	w.sink.mu.Lock()
	defer w.sink.mu.Unlock()
	return w.sink.committed
}

// OpenKeys returns the number of keys with staged or precommitted data.
func (w *Writer) OpenKeys() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.staged) + len(w.precommitted)
}

// Open does nothing.
func (w *Writer) Open(context.Context) error { return nil }

// Close forgets staged data; precommitted descriptors stay committable, as
// they carry their own counts. Close is idempotent.
func (w *Writer) Close(context.Context) error {
	w.metrics.Unregister()
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.staged)
	clear(w.precommitted)
	return nil
}

// Schema returns the fixed schema given to New, or nil.
func (w *Writer) Schema(context.Context) (*arrow.Schema, error) { return w.schema, nil }

// Write counts rec under key. It does no per-row work. rec is borrowed.
func (w *Writer) Write(_ context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	if w.schema != nil {
		if diff := writers.SchemaMismatch(w.schema, rec.Schema()); diff != "" {
			return writers.Errorf(writers.ErrInvalid, "discard: record does not match the endpoint schema: %s", diff)
		}
	}
	n := Totals{Rows: rec.NumRows(), Bytes: util.TotalRecordSize(rec), Batches: 1}
	w.mu.Lock()
	t := w.staged[key]
	t.add(n)
	w.staged[key] = t
	w.mu.Unlock()
	return nil
}

// Precommit moves what is staged for key to its precommitted totals and
// returns them as the descriptor. Calling it again returns the accumulated
// totals, so a lost answer can be asked for again.
func (w *Writer) Precommit(_ context.Context, key writers.TxnKey) (writers.Descriptor, error) {
	w.mu.Lock()
	t := w.precommitted[key]
	t.add(w.staged[key])
	delete(w.staged, key)
	w.precommitted[key] = t
	w.mu.Unlock()
	return json.Marshal(t)
}

// Commit adds the totals of descs to the committed totals and records
// key's epoch, unless key.Writer already committed key.Epoch or a newer
// epoch: then it changes nothing and reports Replayed. Auto-commit keys are
// never recorded. The version is always writers.NoVersion. A descriptor that
// is not discard JSON is ErrInvalid and nothing is committed.
func (w *Writer) Commit(_ context.Context, key writers.TxnKey, descs []writers.Descriptor) (writers.CommitInfo, error) {
	var sum Totals
	for i, d := range descs {
		var t Totals
		if err := json.Unmarshal(d, &t); err != nil {
			return writers.CommitInfo{}, writers.Errorf(writers.ErrInvalid, "discard: descriptor %d is not a discard descriptor (%w): hand over only descriptors precommitted by a discard endpoint", i, err)
		}
		sum.add(t)
	}
	w.forget(key)

	w.sink.mu.Lock()
	defer w.sink.mu.Unlock()
	if !key.Auto {
		if last, ok := w.sink.epochs[key.Writer]; ok && last >= key.Epoch {
			return writers.CommitInfo{Version: writers.NoVersion, Replayed: true}, nil
		}
		w.sink.epochs[key.Writer] = key.Epoch
	}
	w.sink.committed.add(sum)
	return writers.CommitInfo{Version: writers.NoVersion}, nil
}

// Rollback forgets what is staged or precommitted for key. Unknown keys are
// a no-op; Rollback is idempotent.
func (w *Writer) Rollback(_ context.Context, key writers.TxnKey) error {
	w.forget(key)
	return nil
}

func (w *Writer) forget(key writers.TxnKey) {
	w.mu.Lock()
	delete(w.staged, key)
	delete(w.precommitted, key)
	w.mu.Unlock()
}

// CommittedEpoch returns the last epoch writer committed through this
// writer or its peers.
func (w *Writer) CommittedEpoch(_ context.Context, writer string) (int64, bool, error) {
	w.sink.mu.Lock()
	defer w.sink.mu.Unlock()
	e, ok := w.sink.epochs[writer]
	return e, ok, nil
}

// Contract: exactly-once (within the process), no modes, descriptors
// aggregate.
func (w *Writer) Contract() writers.Contract {
	return writers.Contract{Delivery: "exactly-once", AggregatesDescriptors: true}
}

// Check always succeeds: there is nothing to reach.
func (w *Writer) Check(context.Context) error { return nil }

// registerMetrics exports the committed totals, the sink-side truth that
// process-level tests and operators read: quiver_discard_committed_*_total.
func (w *Writer) registerMetrics(reg prometheus.Registerer) error {
	var cs []prometheus.Collector
	for _, m := range []struct {
		name, help string
		value      func(Totals) int64
	}{
		{"rows", "Rows published by commits of the discard sink.", func(t Totals) int64 { return t.Rows }},
		{"bytes", "Arrow bytes published by commits of the discard sink.", func(t Totals) int64 { return t.Bytes }},
		{"batches", "Batches published by commits of the discard sink.", func(t Totals) int64 { return t.Batches }},
	} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "quiver_discard_committed_" + m.name + "_total",
			Help: m.help,
		}, func() float64 { return float64(m.value(w.Committed())) }))
	}
	metrics, err := writers.RegisterMetrics(reg, "discard", cs...)
	if err != nil {
		return err
	}
	w.metrics = metrics
	return nil
}
