package delta

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
	"github.com/quiver-ingest/quiver/writers/tablesink"
)

// Write encodes rec into the key's Parquet files as it arrives: the rows
// are split by partition and handed to the key's encoders (tablesink.Staged),
// which append them to their open file of that partition and finish a
// file (uploaded, still invisible) once it reaches target_file_bytes, so
// memory stays bounded however long the stream. Write blocks while the
// encoders are busy (backpressure) until ctx ends; an encoding or upload
// failure is returned by a later Write or by Precommit.
// A missing table is not created here but by the first commit (newTable).
// rec is borrowed. A batch whose schema does not fit the table is ErrInvalid
// naming the column, and nothing of it is staged.
func (w *Writer) Write(ctx context.Context, key writers.TxnKey, rec arrow.RecordBatch) error {
	s, err := w.stages.Get(key, true)
	if err != nil {
		return err
	}
	if w.cfg.WriteMode == ModeUpsert {
		return w.writeUpsert(ctx, key, s, rec)
	}
	if _, err := w.admitStage(ctx, key, s, rec.Schema()); err != nil {
		return err
	}
	if rec.NumRows() == 0 {
		return nil
	}
	if len(s.missing) > 0 {
		rec = withNulls(w.mem, rec, s.missing)
		defer rec.Release()
	}
	if s.identity != nil {
		filled, err := s.identity.Fill(&w.ids, w.mem, rec)
		if err != nil {
			return err
		}
		defer filled.Release()
		rec = filled
	}
	if err := s.layout.CheckRows(ctx, w.mem, rec); err != nil {
		return err
	}
	parts, recs, err := w.parts.Split(ctx, w.mem, rec, s.layout.Cols)
	if err != nil {
		return err
	}
	if s.pool == nil {
		s.pool = w.newPool(s.layout)
	}
	for i, p := range parts {
		// Send owns recs[i] from here on, whatever it returns.
		if err := s.pool.Send(ctx, tablesink.Part{Dir: p.Dir, Values: p.Values, Rec: recs[i]}); err != nil {
			for _, r := range recs[i+1:] {
				r.Release()
			}
			return err
		}
	}
	return s.pool.Failed()
}

// maxEncoders caps the encoder goroutines of one key.
const maxEncoders = 4

// newPool starts the encoders of a key's rows of layout
// (tablesink.NewPool): Parquet encoding, not receiving, bounds a stream.
func (w *Writer) newPool(layout *deltalayout.Layout) *tablesink.Staged[*dataFile, addFile] {
	return tablesink.NewPool("delta", w.budget, tablesink.Pool{Max: maxEncoders, Busy: &w.encodingKeys}, w.fileStarter(layout, 0),
		func(ctx context.Context, files *tablesink.Files[*dataFile, addFile], p tablesink.Part) error {
			return writePhysical(ctx, files, layout.Cols, p)
		})
}

// admitStage admits the table columns in of the key's next batch: once per
// Arrow schema, and every stream of the key must map to one Delta schema,
// the table columns it lacks (s.missing) counted in. It returns the
// snapshot it admitted them against (nil when they were admitted before).
func (w *Writer) admitStage(ctx context.Context, key writers.TxnKey, s *stage, in *arrow.Schema) (*deltalog.Snapshot, error) {
	if s.admitted != nil && s.admitted.Equal(in) {
		return nil, nil
	}
	if err := w.refreshMapping(ctx, s); err != nil {
		return nil, err
	}
	snap, merged, err := w.fit(ctx, in)
	if err != nil {
		return nil, err
	}
	if deltalog.ColumnMappingMode(snap.Metadata.Configuration) != "none" {
		// Columns the stream adds get ids and physical names
		// (newcolumns.go).
		if err := w.newCols.assign(s, merged, deltalog.MaxColumnID(snap.Metadata.Configuration)); err != nil {
			return nil, err
		}
	}
	missing, err := missingColumns(merged, in)
	if err != nil {
		return nil, err
	}
	layout, err := deltalayout.LayoutOf(snap, merged)
	if err != nil {
		return nil, err
	}
	schema := merged.String()
	if s.schema != "" && s.schema != schema {
		return nil, writers.Errorf(writers.ErrInvalid, "delta: the streams of %s send different schemas: send every stream of a transaction with the same columns", key)
	}
	if s.identity == nil && w.cfg.WriteMode != ModeUpsert {
		// Kept across admits: it records the values the key used.
		if s.identity, err = deltalayout.NewIdentityFill(merged); err != nil {
			return nil, err
		}
	}
	checked := deltalayout.CheckedConstraints(layout.Cons)
	if s.pool != nil || len(s.finished) > 0 || len(s.precommitted) > 0 {
		if !maps.Equal(checked, s.checked) {
			return nil, writers.Errorf(writers.ErrConflict, "delta: the table's constraints changed after rows of %s were checked: roll back the transaction and replay it", key)
		}
	}
	s.schema, s.admitted, s.missing, s.layout, s.checked = schema, in, missing, layout, checked
	return snap, nil
}

// refreshMapping reads the table's latest version before the first batch
// of a key that writes files as it goes (not an upsert: it re-admits when
// it plans) into a column-mapped table: its files take the mapping of
// their first batch, and one an ALTER TABLE changed since the writer last
// read the table (a rename, a drop) would fail the commit. One log listing
// per transaction or stream.
func (w *Writer) refreshMapping(ctx context.Context, s *stage) error {
	snap := w.cached()
	if s.schema != "" || w.cfg.WriteMode == ModeUpsert || snap == nil || deltalog.ColumnMappingMode(snap.Metadata.Configuration) == "none" {
		return nil
	}
	_, err := w.latest(ctx)
	return err
}

// missingColumns returns the columns of table that in lacks, as Arrow
// fields.
func missingColumns(table *deltalog.Schema, in *arrow.Schema) ([]arrow.Field, error) {
	var missing deltalog.Schema
	for _, f := range table.Fields {
		if !in.HasField(f.Name) {
			missing.Fields = append(missing.Fields, f)
		}
	}
	if len(missing.Fields) == 0 {
		return nil, nil
	}
	s, err := missing.ToArrow()
	if err != nil {
		return nil, err
	}
	return s.Fields(), nil
}

// withNulls returns rec with a column of nulls appended for each of
// fields; the caller releases it.
func withNulls(mem memory.Allocator, rec arrow.RecordBatch, fields []arrow.Field) arrow.RecordBatch {
	n := int(rec.NumRows())
	cols := slices.Clone(rec.Columns())
	for _, f := range fields {
		nulls := array.MakeArrayOfNull(mem, f.Type, n)
		defer nulls.Release()
		cols = append(cols, nulls)
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(append(slices.Clone(rec.Schema().Fields()), fields...), &md), cols, int64(n))
}

// deltaSchema maps the table columns of a stream to Delta, refusing what
// no table can hold: types without a Delta or Parquet form. (Column
// names are checked against the table by fit: column mapping lifts
// Spark's rules.)
func (w *Writer) deltaSchema(in *arrow.Schema) (*deltalog.Schema, error) {
	got, err := deltalog.FromArrow(in)
	if err != nil {
		return nil, err
	}
	if err := parquetio.CheckSchema(deltalayout.DropFields(in, w.cfg.PartitionBy)); err != nil {
		return nil, err
	}
	return got, nil
}

// fit checks the table columns in of a stream against the table and
// returns the table and the Delta schema the stream's files follow. Before
// the table exists, the table is the one the stream's first commit would
// create (newTable): nothing is written. A mismatch against the cached
// table is checked again against the latest version, which another writer
// may have evolved. In upsert mode the merge keys must be table columns.
// It has no side effects on the table.
func (w *Writer) fit(ctx context.Context, in *arrow.Schema) (*deltalog.Snapshot, *deltalog.Schema, error) {
	got, err := w.deltaSchema(in)
	if err != nil {
		return nil, nil, err
	}
	snap := w.cached()
	if snap == nil {
		if snap, err = w.latest(ctx); err != nil {
			return nil, nil, err
		}
	}
	if snap == nil {
		if snap, err = w.newTable(in, got); err != nil {
			return nil, nil, err
		}
	}
	if err := deltalayout.CheckNames(got, snap.Metadata.Configuration); err != nil {
		return nil, nil, err
	}
	if table, err := snap.Schema(); err == nil {
		if err := deltalayout.CheckIdentityInput(table, in); err != nil {
			return nil, nil, err
		}
	}
	merged, err := w.reconcileWith(snap, got)
	if err != nil {
		fresh, lerr := w.latest(ctx)
		if lerr != nil || fresh == nil || fresh.Version == snap.Version {
			return nil, nil, err
		}
		if merged, err = w.reconcileWith(fresh, got); err != nil {
			return nil, nil, err
		}
		snap = fresh
	}
	if w.cfg.WriteMode == ModeUpsert {
		if err := w.checkMergeKeys(snap); err != nil {
			return nil, nil, err
		}
	}
	return snap, merged, nil
}

// reconcileWith reconciles the schema of incoming rows with snap's table
// schema under the configured schema_evolution.
func (w *Writer) reconcileWith(snap *deltalog.Snapshot, got *deltalog.Schema) (*deltalog.Schema, error) {
	table, err := snap.Schema()
	if err != nil {
		return nil, fmt.Errorf("delta: table schema: %w", err)
	}
	return deltalayout.Reconcile(table, got, w.cfg.SchemaEvolution == EvolveAddColumns)
}

// Precommit finishes the key's open files (uploaded, not in the log) and
// returns a descriptor of every file the key has precommitted so far, so a
// repeated call (a lost answer) returns the same files and more. A key that
// wrote nothing yields a descriptor that publishes nothing.
func (w *Writer) Precommit(ctx context.Context, key writers.TxnKey) (writers.Descriptor, error) {
	s, err := w.stages.Get(key, false)
	if err != nil {
		return nil, err
	}
	if w.cfg.WriteMode == ModeUpsert {
		// Planned under the pins' gate, so that an optimize commits
		// either before the plan read the table or after its files are
		// pinned (tablesink.Pins).
		if err := w.pins.BeginPlan(ctx); err != nil {
			return nil, err
		}
		var read []string
		defer func() { w.pins.EndPlan(key, read) }()
		desc, err := w.precommitUpsert(ctx, key, s)
		if err == nil && s != nil && s.upsert != nil {
			read = s.upsert.read
		}
		return desc, err
	}
	d := descriptor{PartitionColumns: w.cfg.PartitionBy, Adds: []addFile{}}
	if s != nil {
		if s.pool != nil {
			files, err := s.pool.Finish()
			s.pool = nil
			s.finished = append(s.finished, files...)
			if err != nil {
				return nil, err
			}
		}
		s.precommitted = append(s.precommitted, s.finished...)
		s.finished = nil
		d.Schema, d.Adds, d.MappedAfter = s.schema, s.precommitted, s.mappedAfter
		d.Constraints = s.checked
		if s.identity != nil && len(s.identity.Ranges) > 0 {
			d.Identity = s.identity.Ranges
		}
	}
	return d.encode()
}

// Rollback forgets key: open files are abandoned and finished files that
// no descriptor names are deleted. Precommitted files stay where they are,
// unreferenced, because a commit elsewhere may still publish them. Unknown
// keys are a no-op; Rollback is idempotent.
func (w *Writer) Rollback(ctx context.Context, key writers.TxnKey) error {
	if w.pins != nil {
		w.pins.Unpin(key)
	}
	return w.stages.Rollback(ctx, key)
}
