package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// ensureTable creates the table from the Arrow schema of the first batch
// (got is its Delta form), with partition_by and the configured checkpoint
// interval. When another writer created it first, the table it made is
// returned, and admit checks the batch against it.
func (w *Writer) ensureTable(ctx context.Context, in *arrow.Schema, got *deltalog.Schema) (*deltalog.Snapshot, error) {
	for _, col := range w.cfg.PartitionBy {
		f, ok := got.Field(col)
		switch {
		case !ok:
			return nil, writers.Errorf(writers.ErrInvalid, "delta: partition_by column %q is not in the first batch (columns: %s): send it or change partition_by", col, columnNames(got))
		case f.Type.Fields != nil || f.Type.Element != nil || f.Type.Key != nil || f.Type.Name == "binary":
			return nil, writers.Errorf(writers.ErrInvalid, "delta: partition_by column %q has type %s: partition by a string, number, boolean, date, timestamp or decimal column", col, f.Type)
		}
	}
	props := map[string]string{"delta.checkpointInterval": strconv.Itoa(w.cfg.CheckpointInterval)}
	if w.cfg.DeletionVectors {
		props[enableDVProperty] = "true"
	}
	snap, err := deltalog.Create(ctx, w.bucket, in, w.cfg.PartitionBy, props)
	var conflict *deltalog.ConflictError
	if errors.As(err, &conflict) && conflict.Kind == deltalog.ConflictTableExists {
		if snap, err = w.latest(ctx); err == nil && snap == nil {
			err = writers.Errorf(writers.ErrUnavailable, "delta: table %s was created concurrently but cannot be read yet: retry", w.cfg.TableURI)
		}
		return snap, err
	}
	if err != nil {
		return nil, fmt.Errorf("delta: create table %s: %w", w.cfg.TableURI, err)
	}
	w.log.Info("delta table created", "table", w.cfg.TableURI, "columns", writers.FieldList(in), "partition_by", w.cfg.PartitionBy)
	return w.remember(snap), nil
}

// createFromDescriptors creates the table at commit time when it does not
// exist (it was removed after the files were written, or the descriptors
// come from servers writing a table this one never saw created): the
// schema comes from the first descriptor carrying files.
func (w *Writer) createFromDescriptors(ctx context.Context, ds []*descriptor) (*deltalog.Snapshot, error) {
	for _, d := range ds {
		if d.Schema == "" {
			continue
		}
		s, err := deltalog.ParseSchema(d.Schema)
		if err != nil {
			return nil, writers.Errorf(writers.ErrInvalid, "delta: descriptor schema: %w", err)
		}
		in, err := s.ToArrow()
		if err != nil {
			return nil, err
		}
		got, err := deltalog.FromArrow(in)
		if err != nil {
			return nil, err
		}
		return w.ensureTable(ctx, in, got)
	}
	return nil, writers.Errorf(writers.ErrWrongState, "delta: table %s does not exist and the transaction carries no rows to define its schema: write rows first", w.cfg.TableURI)
}

// commitPlanned writes actions as the version after base (deltalog
// rebases over blind appends and writes checkpoints). An upsert's commit
// is based on the version it was planned at (upsertBase), with its read
// set, so that deltalog checks every commit since against it.
func (w *Writer) commitPlanned(ctx context.Context, base *deltalog.Snapshot, actions []deltalog.Action, upsert *upsertPlan) (int64, error) {
	opts := deltalog.CommitOptions{
		ReadWholeTable: w.cfg.WriteMode == ModeOverwrite,
		EngineInfo:     "quiver",
		Logger:         w.log,
	}
	if upsert != nil {
		opts = w.upsertCommitOptions(upsert)
	}
	v, err := deltalog.Commit(ctx, w.bucket, base, actions, opts)
	if err != nil {
		return 0, fmt.Errorf("delta: commit to %s: %w", w.cfg.TableURI, err)
	}
	w.m.version.Set(float64(v))
	return v, nil
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
