package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// newTable returns the table that the first commit of rows of Arrow
// schema in (got is its Delta form) creates, as a snapshot at version -1
// (deltalog.NewTableSnapshot): partitioned by partition_by, with the
// configured checkpoint interval and deletion vectors. Nothing is written:
// a table is created by the commit that publishes its first rows, so a
// stream rolled back before its commit leaves no table (nor schema)
// behind. Writes, plans and commits use it like any snapshot.
func (w *Writer) newTable(in *arrow.Schema, got *deltalog.Schema) (*deltalog.Snapshot, error) {
	for _, col := range w.cfg.PartitionBy {
		f, ok := got.Field(col)
		switch {
		case !ok:
			return nil, writers.Errorf(writers.ErrInvalid, "delta: partition_by column %q is not in the stream that creates the table (columns: %s): send it or change partition_by", col, deltalayout.ColumnNames(got))
		case f.Type.Fields != nil || f.Type.Element != nil || f.Type.Key != nil || f.Type.Name == "binary":
			return nil, writers.Errorf(writers.ErrInvalid, "delta: partition_by column %q has type %s: partition by a string, number, boolean, date, timestamp or decimal column", col, f.Type)
		}
	}
	props := map[string]string{"delta.checkpointInterval": strconv.Itoa(w.cfg.CheckpointInterval)}
	if w.cfg.DeletionVectors {
		props[enableDVProperty] = "true"
	}
	snap, err := deltalog.NewTableSnapshot(in, w.cfg.PartitionBy, props)
	if err != nil {
		return nil, fmt.Errorf("delta: new table %s: %w", w.cfg.TableURI, err)
	}
	return snap, nil
}

// tableFor returns the table that the first commit of files following
// schema (a Delta schemaString from a descriptor or a stage) creates.
func (w *Writer) tableFor(schema string) (*deltalog.Snapshot, error) {
	got, err := deltalog.ParseSchema(schema)
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor schema: %w", err)
	}
	if err := deltalayout.CheckNames(got, nil); err != nil {
		return nil, err
	}
	in, err := got.ToArrow()
	if err != nil {
		return nil, err
	}
	return w.newTable(in, got)
}

// tableFromDescriptors returns the table a commit of ds creates when there
// is none: its schema is the first descriptor's carrying files (the
// others are reconciled with it by plan).
func (w *Writer) tableFromDescriptors(ds []*descriptor) (*deltalog.Snapshot, error) {
	for _, d := range ds {
		if len(d.Adds) > 0 {
			return w.tableFor(d.Schema)
		}
	}
	for _, d := range ds { // an empty epoch: the schema its stream sent
		if d.Schema != "" {
			return w.tableFor(d.Schema)
		}
	}
	return nil, writers.Errorf(writers.ErrInvalid, "delta: the descriptors of a commit creating table %s carry no files and no schema", w.cfg.TableURI)
}

// commitPlanned writes actions as the version after base (deltalog
// rebases over blind appends and writes checkpoints); a base at version -1
// (newTable) makes it the commit that creates the table. An upsert's
// commit is based on the version it was planned at (upsertBase), with its
// read set, so that deltalog checks every commit since against it.
func (w *Writer) commitPlanned(ctx context.Context, base *deltalog.Snapshot, actions []deltalog.Action, upsert *upsertPlan) (int64, error) {
	opts := deltalog.CommitOptions{
		ReadWholeTable: w.cfg.WriteMode == ModeOverwrite,
		EngineInfo:     "quiver",
		Logger:         w.log,
	}
	if upsert != nil {
		opts = w.upsertCommitOptions(upsert)
	}
	opts.CheckpointInterval = w.env.Maintenance.CheckpointInterval // 0: the table's
	opts.Turn = w.turnFor()
	v, err := deltalog.Commit(ctx, w.bucket, base, actions, opts)
	if err != nil {
		return 0, fmt.Errorf("delta: commit to %s: %w", w.cfg.TableURI, err)
	}
	w.cleanLogAfter(base, v)
	if base.Version < 0 {
		w.log.Info("delta table created", "table", w.cfg.TableURI, "schema", base.Metadata.SchemaString, "partition_by", w.cfg.PartitionBy)
	}
	w.m.version.Set(float64(v))
	return v, nil
}

// turnWait bounds how long a commit waits for its turn: past it, it
// publishes anyway, racing as commits did without turns, so that a turn
// held by a stuck store call does not stall every stream of the endpoint.
const turnWait = 2 * time.Second

// turnFor is the endpoint's turn to publish a commit
// (deltalog.CommitOptions.Turn) on file://, nil elsewhere. Sixteen
// streams finishing together otherwise race for each version, every
// loser writing and syncing its commit file for nothing, then sleeping a
// backoff. On object stores a commit made stale by an earlier turn would
// still pay a refused PUT and the rebase's reads while holding the turn:
// they race as before.
func (w *Writer) turnFor() func(context.Context) (func(), error) {
	if !w.bucket.Local() {
		return nil
	}
	return w.commitTurn
}

// commitTurn waits for the endpoint's turn, at most w.turnWait; after that
// it returns a release that gives back nothing.
func (w *Writer) commitTurn(ctx context.Context) (release func(), err error) {
	t := time.NewTimer(w.turnWait)
	defer t.Stop()
	select {
	case w.turn <- struct{}{}:
		return func() { <-w.turn }, nil
	case <-t.C:
		w.log.Warn("delta: a commit waited for its turn to publish longer than allowed and races for its version instead", "table", w.cfg.TableURI, "waited", w.turnWait)
		return func() {}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// checkTable refuses a table Quiver cannot write or whose partitioning
// differs from partition_by.
func (w *Writer) checkTable(snap *deltalog.Snapshot) error {
	if err := deltalog.CheckWritable(snap); err != nil {
		return fmt.Errorf("delta: table %s: %w", w.cfg.TableURI, err)
	}
	have := snap.Metadata.PartitionColumns
	if !slices.Equal(have, w.cfg.PartitionBy) {
		return writers.Errorf(writers.ErrInvalid, "delta: table %s is partitioned by %q but partition_by is %q: set partition_by to the table's partition columns", w.cfg.TableURI, have, w.cfg.PartitionBy)
	}
	if w.cfg.DeletionVectors && !deletionVectorsEnabled(snap) {
		return writers.Errorf(writers.ErrInvalid, "delta: table %s does not enable deletion vectors (%s=true and the deletionVectors table feature) but deletion_vectors is true: set deletion_vectors: false, or enable them on the table (Spark: ALTER TABLE … SET TBLPROPERTIES ('%s' = true))", w.cfg.TableURI, enableDVProperty, enableDVProperty)
	}
	return nil
}

// enableDVProperty is the table property that lets writers create
// deletion vectors.
const enableDVProperty = "delta.enableDeletionVectors"

// deletionVectorsEnabled reports whether writers may add deletion vectors
// to snap's table: the property is on and the protocol lists the feature.
func deletionVectorsEnabled(snap *deltalog.Snapshot) bool {
	return strings.EqualFold(snap.Metadata.Configuration[enableDVProperty], "true") &&
		snap.Protocol.HasWriterFeature("deletionVectors")
}

// latest reads the table's latest version (incrementally from the cached
// snapshot), checks it and caches it. It returns nil, nil when there is no
// table yet.
func (w *Writer) latest(ctx context.Context) (*deltalog.Snapshot, error) {
	w.mu.Lock()
	prev := w.snap
	w.mu.Unlock()
	var (
		snap *deltalog.Snapshot
		err  error
	)
	if prev != nil {
		snap, err = prev.Update(ctx, w.bucket)
	} else {
		snap, err = deltalog.Load(ctx, w.bucket)
	}
	if errors.Is(err, deltalog.ErrTableNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("delta: read table %s: %w", w.cfg.TableURI, err)
	}
	if prev == nil || snap.Version != prev.Version {
		if err := w.checkTable(snap); err != nil {
			return nil, err
		}
	}
	return w.remember(snap), nil
}

// remember caches snap unless a newer one is cached, and returns the
// newest.
func (w *Writer) remember(snap *deltalog.Snapshot) *deltalog.Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.snap == nil || snap.Version > w.snap.Version {
		w.snap = snap
		w.m.version.Set(float64(snap.Version))
	}
	return w.snap
}

// cached returns the cached snapshot (nil when no table was seen).
func (w *Writer) cached() *deltalog.Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snap
}

// Check probes the table without writing: the root is reachable, and an
// existing table is readable and writable by Quiver and partitioned as
// configured. It may run before Open.
func (w *Writer) Check(ctx context.Context) error {
	return w.root.Probe(ctx, w.bucket, func(b *storage.Bucket) error {
		snap, err := deltalog.Load(ctx, b)
		if errors.Is(err, deltalog.ErrTableNotFound) {
			// Probe reachability: listing an empty or missing root is fine.
			for _, err := range b.List(ctx, "", "") {
				if err != nil {
					return fmt.Errorf("delta: table_uri %s is not reachable: %w", w.cfg.TableURI, err)
				}
				break
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("delta: read table %s: %w", w.cfg.TableURI, err)
		}
		return w.checkTable(snap)
	})
}

// Schema returns the table's schema (partition columns included) as of the
// latest version, or nil when the table does not exist yet, also while a
// first stream is staged or precommitted: its commit creates the table.
func (w *Writer) Schema(ctx context.Context) (*arrow.Schema, error) {
	snap, err := w.latest(ctx)
	if err != nil || snap == nil {
		return nil, err
	}
	s, err := snap.Schema()
	if err != nil {
		return nil, fmt.Errorf("delta: table schema: %w", err)
	}
	return s.ToArrow()
}

// CheckSchema admits a stream's schema without side effects, with the
// rule Write applies (fit): its types must map to Delta and Parquet, its
// column names must be ones Spark accepts (CheckNames), and it must
// reconcile with the table's schema under schema_evolution (other Arrow
// encodings of a column's Delta type, such as dictionary or large strings
// and any timestamp unit, are accepted) or, before the table exists, be
// able to create it (partition_by). In upsert mode the merge keys must be
// in the schema and the changelog metadata columns
// (merge.MetadataColumns) of their types; they are not table columns.
func (w *Writer) CheckSchema(ctx context.Context, in *arrow.Schema) error {
	if w.cfg.WriteMode == ModeUpsert {
		// The merge keys and the changelog columns' types; the
		// Collapser holds nothing yet.
		c, err := merge.NewCollapser(in, merge.Options{Keys: w.cfg.MergeKeys})
		if err != nil {
			return fmt.Errorf("delta: upsert: %w", err)
		}
		c.Close()
		in = merge.StripMetadata(in)
	}
	_, _, err := w.fit(ctx, in)
	return err
}
