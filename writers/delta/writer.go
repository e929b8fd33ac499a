package delta

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltaupsert"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/tablesink"
)

var (
	_ tablesink.Sink             = (*Writer)(nil)
	_ writers.AttemptFencer      = (*Writer)(nil)
	_ writers.PrecommitDiscarder = (*Writer)(nil)
)

// Writer is the Delta sink of one endpoint. All methods are safe for
// concurrent use within the writers.Writer contract (calls for one key are
// never concurrent).
type Writer struct {
	// Fences marks attempts fenced in the table (writers.AttemptFencer).
	tablesink.Fences
	// Discards deletes the files of precommits rolled back on this server
	// alone (writers.PrecommitDiscarder).
	tablesink.Discards
	cfg        *Config
	env        writers.Env
	log        *slog.Logger
	mem        memory.Allocator
	budget     writers.MemoryCharger // the server's memory budget
	m          *metrics
	registered *writers.Metrics // m on env.Registerer, until Close
	parts      deltalayout.Partitioner
	root       tablesink.Root
	bucket     *storage.Bucket // set by Open, read-only afterwards
	stages     *tablesink.Stages[stage]
	keys       *deltaupsert.KeyCache // upsert's per-file key indexes; nil when disabled
	// encodingKeys counts the keys whose encoders run (newPool to
	// their stop): a key started while others encode takes fewer.
	encodingKeys atomic.Int32
	// warmCtx bounds the key warm-ups (warmKeys), which warming counts;
	// Close cancels it and waits.
	warmCtx  context.Context
	stopWarm context.CancelFunc
	warming  sync.WaitGroup
	// cleaning is true while a log cleanup runs (cleanLogAfter).
	cleaning atomic.Bool
	// pins keep optimize away from the files precommitted upserts read:
	// shared by the process's writers of the table, acquired by Open,
	// released by Close (pins.go).
	pins        *tablesink.Pins[string]
	releasePins func()
	// ids hands out identity column values (deltalayout.IdentityAllocator).
	ids deltalayout.IdentityAllocator
	// newCols shares the column mapping of added columns (newcolumns.go).
	newCols newColumns
	// turn is the endpoint's turn to publish a commit (commitTurn): its
	// streams' commits take turns instead of racing for each version;
	// turnWait bounds the wait for it.
	turn     chan struct{}
	turnWait time.Duration

	mu   sync.Mutex // guards the following fields
	snap *deltalog.Snapshot
	// lastCommit remembers, per transactional writer, the last commit
	// made through this Writer, so that a repeated Commit answers the
	// original version without reading the log.
	lastCommit map[string]committedAt
	warmDone   chan struct{} // closed when the last warm-up started ends
}

// New returns an unopened writer for cfg, which must be valid. A nil
// env.Logger discards logs, a nil env.Registerer registers no metrics and a
// nil env.Allocator means memory.DefaultAllocator.
func New(cfg *Config, env writers.Env) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("delta: %w: %w", writers.ErrInvalid, err)
	}
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	if env.Allocator == nil {
		env.Allocator = memory.DefaultAllocator
	}
	env.Maintenance = writers.MaintenanceOf(env)
	w := &Writer{
		cfg:        cfg,
		env:        env,
		log:        env.Logger,
		mem:        env.Allocator,
		budget:     writers.MemoryOf(env),
		m:          newMetrics(),
		parts:      deltalayout.Partitioner{Cols: cfg.PartitionBy},
		root:       tablesink.Root{Sink: "delta", Option: "table_uri", URI: cfg.TableURI, BaseDir: env.ConfigDir},
		lastCommit: make(map[string]committedAt),
		turn:       make(chan struct{}, 1),
		turnWait:   turnWait,
	}
	w.stages = tablesink.NewStages("delta", w.discard)
	w.Fences = tablesink.Fences{Bucket: &w.bucket}
	w.Discards = tablesink.Discards{Bucket: &w.bucket, Written: writtenFiles}
	if cfg.WriteMode == ModeUpsert && cfg.KeyIndexMaxBytes > 0 {
		w.keys = deltaupsert.NewKeyCache(cfg.KeyIndexMaxBytes, w.m.keyIndexBytes)
	}
	w.warmCtx, w.stopWarm = context.WithCancel(context.Background())
	w.m.version.Set(-1)
	reg, err := w.m.register(env.Registerer)
	if err != nil {
		return nil, err
	}
	w.registered = reg
	return w, nil
}

// Open opens the table root and reads the table if it exists; a missing
// table is created by the first commit that publishes rows. An existing
// table must be writable by Quiver (deltalog.CheckWritable) and
// partitioned by partition_by.
func (w *Writer) Open(ctx context.Context) error {
	var err error
	w.pins, w.releasePins, err = tablesink.OpenPinned[string](ctx, w.root, w.log, &w.bucket, w.latest)
	return err
}

// Target names the table: a transaction writes it through one endpoint
// (writers.Targeted), its epoch being recorded under its writer's app id.
func (w *Writer) Target() string { return w.root.Target() }

var _ writers.Targeted = (*Writer)(nil)

// Close discards what open keys staged (precommitted files stay for a
// commit to publish), stops their encoders and releases the table root.
// It must not run concurrently with Write (the server closes writers once
// every stream has ended). Close is idempotent.
func (w *Writer) Close(ctx context.Context) error {
	return w.stages.CloseWriter(ctx, w.bucket, func() {
		w.registered.Unregister()
		w.stopWarm()
		w.warming.Wait()
	}, w.releasePins)
}

// Contract: exactly-once through txn actions; append, overwrite and
// upsert; in append and overwrite mode descriptors of other servers
// publish in one Delta commit.
func (w *Writer) Contract() writers.Contract {
	return writers.Contract{
		Delivery: "exactly-once",
		Modes:    []string{ModeAppend, ModeOverwrite, ModeUpsert},
		// An upsert is planned against one snapshot by one server: two
		// plans made apart cannot be published together (upsertOf).
		AggregatesDescriptors: w.cfg.WriteMode != ModeUpsert,
		Rewrites:              w.cfg.WriteMode == ModeUpsert,
	}
}

// CommittedEpoch returns the txn version the table records for appId
// writer at its latest version.
func (w *Writer) CommittedEpoch(ctx context.Context, writer string) (int64, bool, error) {
	snap, err := w.latest(ctx)
	if err != nil || snap == nil {
		return 0, false, err
	}
	v, ok := snap.TxnVersion(writer)
	return v, ok, nil
}
