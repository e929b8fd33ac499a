package lance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/lance/lancetable"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/tablesink"
)

var (
	_ writers.AttemptFencer      = (*Writer)(nil)
	_ writers.PrecommitDiscarder = (*Writer)(nil)
)

// Writer is the Lance sink of one endpoint. All methods are safe for
// concurrent use within the writers.Writer contract (calls for one key are
// never concurrent).
type Writer struct {
	// Fences marks attempts fenced in the dataset (writers.AttemptFencer).
	tablesink.Fences
	// Discards deletes the files of precommits rolled back on this server
	// alone (writers.PrecommitDiscarder).
	tablesink.Discards
	cfg    *Config
	env    writers.Env
	log    *slog.Logger
	root   tablesink.Root
	bucket *storage.Bucket // set by Open, read-only afterwards
	budget writers.MemoryCharger

	stages *tablesink.Stages[stage]

	// pins keep optimize away from the fragments precommitted merges
	// touched: shared by the process's writers of the dataset, acquired
	// by Open, released by Close (pins.go).
	pins        *tablesink.Pins[uint64]
	releasePins func()
	hist        history // committed epochs read from the version history
	barren      barrenGroups
	m           *metrics
	registered  *writers.Metrics // m on env.Registerer, until Close

	idxMu sync.Mutex // guards idx and serializes merge planning
	// idx is the merge_insert key index; nil in append mode, with
	// key_index_max_bytes 0, or after it outgrew that bound.
	idx *keyIndex
	// patching counts background index patches and builds (see
	// patchIndex); Close cancels background (a build in progress stops)
	// and waits for them.
	patching   sync.WaitGroup
	background context.Context
	stopBack   context.CancelFunc
	// lastSourceRows sizes the next merge source's key set: the rows of
	// the last one (transactions of one stream tend to be alike).
	lastSourceRows atomic.Int64
}

var _ tablesink.Sink = (*Writer)(nil)

// New returns an unopened writer for cfg, which must be valid. A nil
// env.Logger discards logs; a nil env.Registerer registers no metrics, and
// registering them twice on one Registerer is an error.
func New(cfg *Config, env writers.Env) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("lance: %w: %w", writers.ErrInvalid, err)
	}
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{cfg: cfg, env: env, log: env.Logger, budget: writers.MemoryOf(env), hist: history{epochs: make(map[string]committedAt)}, m: newMetrics(),
		root: tablesink.Root{Sink: "lance", Option: "dataset_uri", URI: cfg.DatasetURI, BaseDir: env.ConfigDir}}
	w.stages = tablesink.NewStages("lance", w.discard)
	w.Fences = tablesink.Fences{Bucket: &w.bucket}
	w.Discards = tablesink.Discards{Bucket: &w.bucket, Written: writtenFiles}
	w.background, w.stopBack = context.WithCancel(context.Background())
	reg, err := w.m.register(env.Registerer)
	if err != nil {
		return nil, err
	}
	w.registered = reg
	if cfg.WriteMode == ModeMergeInsert && cfg.KeyIndexMaxBytes > 0 {
		w.idx = newKeyIndex()
	}
	return w, nil
}

// Open opens the dataset root and checks an existing dataset is writable
// by Quiver; a missing dataset is created by the first commit.
func (w *Writer) Open(ctx context.Context) error {
	var err error
	w.pins, w.releasePins, err = tablesink.OpenPinned[uint64](ctx, w.root, w.log, &w.bucket, w.latest)
	return err
}

// Target names the dataset: a transaction writes it through one endpoint
// (writers.Targeted), its epoch being recorded under its writer in the
// transaction properties.
func (w *Writer) Target() string { return w.root.Target() }

var _ writers.Targeted = (*Writer)(nil)

// latest returns the newest version, nil when there is no dataset, or an
// error when it cannot be read or Quiver cannot write it.
func (w *Writer) latest(ctx context.Context) (*lancetable.Dataset, error) {
	d, err := lancetable.Latest(ctx, w.bucket)
	if errors.Is(err, lancetable.ErrNoDataset) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lance: read dataset %s: %w", w.cfg.DatasetURI, err)
	}
	w.m.version.Set(float64(d.Version()))
	if err := d.CheckWritable(); err != nil {
		return nil, fmt.Errorf("%w (dataset %s)", err, w.cfg.DatasetURI)
	}
	return d, nil
}

// Close discards what open keys staged (precommitted files stay for a
// commit to publish), stops and waits for background key index work and releases
// the root. Close is idempotent.
func (w *Writer) Close(ctx context.Context) error {
	return w.stages.CloseWriter(ctx, w.bucket, func() {
		w.registered.Unregister()
		w.stopBack()
		w.patching.Wait()
	}, w.releasePins)
}

// Contract: exactly-once through transaction properties; append and
// merge_insert. Append descriptors of other servers publish in one Lance
// version; a merge is planned on one version, so merge_insert does not
// aggregate.
func (w *Writer) Contract() writers.Contract {
	return writers.Contract{Delivery: "exactly-once", Modes: []string{ModeAppend, ModeMergeInsert},
		AggregatesDescriptors: w.cfg.WriteMode != ModeMergeInsert,
		Rewrites:              w.cfg.WriteMode == ModeMergeInsert}
}

// Schema returns the dataset's schema, or nil before the dataset exists,
// also while a first stream is staged or precommitted: the commit that
// publishes its rows creates the dataset.
func (w *Writer) Schema(ctx context.Context) (*arrow.Schema, error) {
	d, err := w.latest(ctx)
	if err != nil || d == nil {
		return nil, err
	}
	return d.Manifest.Schema.ToArrow()
}

// CheckSchema admits a stream's schema without side effects, with the
// rule Write applies (admit): column names Lance accepts (checkNames), and
// the dataset's columns, or before it exists types Lance 2.0 stores; in
// merge_insert mode the key columns and, for a changelog, its metadata
// columns (which are not dataset columns).
func (w *Writer) CheckSchema(ctx context.Context, s *arrow.Schema) error {
	_, _, err := w.admit(ctx, s)
	return err
}

// Check probes the dataset without writing: the root is reachable, and an
// existing dataset is readable and writable by Quiver. It may run before
// Open.
func (w *Writer) Check(ctx context.Context) error {
	return w.root.Probe(ctx, w.bucket, func(b *storage.Bucket) error {
		d, err := lancetable.Latest(ctx, b)
		if errors.Is(err, lancetable.ErrNoDataset) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lance: read dataset %s: %w", w.cfg.DatasetURI, err)
		}
		return d.CheckWritable()
	})
}
