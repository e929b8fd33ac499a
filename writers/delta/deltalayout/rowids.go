package deltalayout

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
)

// Rows an upsert or optimize rewrites keep their row ids in tables that
// track rows (deltalog assigns the ids of new files): a row's id and commit
// version are its file's materialized columns where not null, else its
// file's baseRowId + its position and the file's defaultRowCommitVersion
// (the Delta protocol, "Row Tracking"). A copied row carries both values
// into its new file's materialized columns; a row an upsert updates keeps
// its id (found by the key match, deltaupsert.FileMatcher, and kept
// with the columns the changelog lacks, deltaupsert.KeptColumns) and
// takes the commit's version (a null commit version column); an inserted
// row gets a fresh id.

// RowTracking names the materialized row-tracking columns of a table.
type RowTracking struct {
	IDCol, VersionCol string
}

// RowTrackingOf returns the materialized columns of snap's table, nil when
// it does not track rows or has not named them (row tracking supported but
// never enabled: row ids are then not promised stable, and Spark does not
// materialize them either).
func RowTrackingOf(snap *deltalog.Snapshot) *RowTracking {
	conf := snap.Metadata.Configuration
	rt := &RowTracking{IDCol: conf[deltalog.MaterializedRowIDProperty], VersionCol: conf[deltalog.MaterializedRowCommitVersionProperty]}
	if !deltalog.RowTrackingOn(snap) || rt.IDCol == "" || rt.VersionCol == "" {
		return nil
	}
	return rt
}

// Fields returns the Arrow Fields of the materialized columns: the id's
// alone, or the commit version's too.
func (rt *RowTracking) Fields(version bool) []arrow.Field {
	f := []arrow.Field{{Name: rt.IDCol, Type: arrow.PrimitiveTypes.Int64, Nullable: true}}
	if version {
		f = append(f, arrow.Field{Name: rt.VersionCol, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	return f
}

// Materialize returns rec, rows of data file a, with its materialized row
// id and commit version columns filled in: the value rec holds where not
// null, else the file's default. Row i of rec is at file position
// first+i. A file without baseRowId (it predates row tracking) leaves the
// id null: the row gets a fresh one. The caller releases the result.
func (rt *RowTracking) Materialize(mem memory.Allocator, rec arrow.RecordBatch, a *deltalog.Add, first int64) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	fields := slices.Clone(rec.Schema().Fields())
	cols := slices.Clone(rec.Columns())
	var made []arrow.Array
	defer func() {
		for _, c := range made {
			c.Release()
		}
	}()
	// defaults[j](i) is row i's default for column j, ok false for none.
	defaults := []func(i int) (v int64, ok bool){
		func(i int) (int64, bool) {
			if a.BaseRowID == nil {
				return 0, false
			}
			return *a.BaseRowID + first + int64(i), true
		},
		func(int) (int64, bool) {
			if a.DefaultRowCommitVersion == nil {
				return 0, false
			}
			return *a.DefaultRowCommitVersion, true
		},
	}
	for j, f := range rt.Fields(true) {
		var have *array.Int64
		idx := rec.Schema().FieldIndices(f.Name)
		if len(idx) > 0 {
			var ok bool
			if have, ok = rec.Column(idx[0]).(*array.Int64); !ok {
				return nil, fmt.Errorf("delta: data file %s: row tracking column %q is %s, not long", a.Path, f.Name, rec.Column(idx[0]).DataType())
			}
		}
		b := array.NewInt64Builder(mem)
		b.Reserve(n)
		for i := range n {
			if have != nil && have.IsValid(i) {
				b.UnsafeAppend(have.Value(i))
			} else if v, ok := defaults[j](i); ok {
				b.UnsafeAppend(v)
			} else {
				b.AppendNull()
			}
		}
		c := b.NewInt64Array()
		b.Release()
		made = append(made, c)
		if len(idx) > 0 {
			cols[idx[0]] = c
		} else {
			fields, cols = append(fields, f), append(cols, c)
		}
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), nil
}
