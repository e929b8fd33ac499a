package deltaupsert

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers/delta/deltalayout"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// The key match of an upsert finds which rows of a target file hold one
// of the source's keys. In a table that tracks rows it also finds their
// row ids, which the rows that replace them keep (deltalayout.RowTracking): the
// materialized row id column where the file has it and the row's value
// is not null, else the file's baseRowId + the row's position. Reading
// that one column along with the key columns costs far less than reading
// the matched files again for it, and the key cache keeps it with the
// file's keys.

// noRowID marks a matched row without a row id (its file predates row
// tracking, or its materialized id is null): the row that replaces it
// gets a fresh one. Row ids are non-negative (PROTOCOL.md, "Row
// Tracking"), so -1 is never a real one and stands for null.
const noRowID = -1

// FileMatches are the rows of one target file whose key is among a
// group's source keys, ascending by position.
type FileMatches struct {
	Pos []int64 // positions in the file
	ord []int32 // their keys' ordinals in the group's set
	ids []int64 // their row ids (noRowID: none); nil unless asked for
}

// Len is the number of matched rows.
func (fm *FileMatches) Len() int { return len(fm.Pos) }

// add appends the row at position pos, of key ordinal ord and row id id
// (kept when ids are asked for).
func (fm *FileMatches) add(pos int64, ord int32, id int64, ids bool) {
	fm.Pos, fm.ord = append(fm.Pos, pos), append(fm.ord, ord)
	if ids {
		fm.ids = append(fm.ids, id)
	}
}

// Without drops the rows at the positions of drop (ascending): the rows a
// deletion vector already marks.
func (fm *FileMatches) Without(drop []int64) {
	if len(drop) == 0 {
		return
	}
	n, j := 0, 0
	for i, p := range fm.Pos {
		for j < len(drop) && drop[j] < p {
			j++
		}
		if j < len(drop) && drop[j] == p {
			continue
		}
		fm.Pos[n], fm.ord[n] = p, fm.ord[i]
		if fm.ids != nil {
			fm.ids[n] = fm.ids[i]
		}
		n++
	}
	fm.Pos, fm.ord = fm.Pos[:n], fm.ord[:n]
	if fm.ids != nil {
		fm.ids = fm.ids[:n]
	}
}

// rowID returns the id of the row at position pos of a file with
// baseRowId base (nil: none) whose materialized id there is mat
// (noRowID: null or no such column).
func rowID(mat int64, base *int64, pos int64) int64 {
	switch {
	case mat != noRowID:
		return mat
	case base != nil:
		return *base + pos
	}
	return noRowID
}

// Matches answers MatchedRows for file a from the key cache when it
// holds a's keys, read under the table's key layout, in the source's
// encoding (and, when rt is set, the materialized row ids of its column).
// A lookup in the cache costs fewer probes than reading the file would,
// whatever the sizes: it probes from the smaller side (FileKeys.lookup).
func (c *KeyCache) Matches(a *deltalog.Add, layout string, grp *KeyGroup, src *merge.KeyEncoder, rt *deltalayout.RowTracking) (fm FileMatches, rows int64, ok bool) {
	if c == nil {
		return fm, 0, false
	}
	fk := c.Get(a.Path, layout)
	if fk == nil || fk.enc != nil && src.SameEncoding(fk.enc) != nil || rt != nil && fk.IDCol != rt.IDCol {
		return fm, 0, false
	}
	return fk.lookup(grp.set, a.BaseRowID, rt != nil), fk.rows, true
}

// FileMatcher finds the rows of one target file whose data keys are
// among a group's source keys. Without a group (and source) it indexes
// the file's keys into the key cache instead (warmKeys): building an
// index costs more than matching, so a precommit only matches and leaves
// the indexing to the background after its commit.
type FileMatcher struct {
	Cache *KeyCache              // indexes the file's keys into it (without a group); nil: none
	Mem   memory.Allocator       // for what it reads and builds
	Cols  *deltalayout.ColumnMap // the table's column mapping (nil without)
	Grp   *KeyGroup
	Keys  []string          // data key columns
	Src   *merge.KeyEncoder // the source's encoder, for SameEncoding
	File  string
	// RT, when set, has the row ids found too: matched rows' ids, or the
	// materialized ones for the index. base is the file's baseRowId.
	RT   *deltalayout.RowTracking
	Base *int64
	enc  *merge.KeyEncoder
	rows []int32 // of the current batch: the matched rows
	ords []int32 // the matched rows' key ordinals
	// index collects the file's keys for the key cache (without a group);
	// nil when matching, or once the file turned out to hold a key twice.
	// matIDs collects the file's materialized row ids for it (rt set and
	// the file has the column).
	index    *merge.KeyIndex
	matIDs   []int64
	RowsHint int   // the file's rows by its stats (0: unknown), to size index
	first    int64 // file position of the current batch's first row
}

// MatchedRows reads the data key columns of the file (and, with rt, its
// materialized row id column) and returns its rows whose key is among the
// group's, and the file's row count; without a group it indexes the
// file's keys into the writer's key cache instead. A key column the file
// lacks (added to the table after the file was written) is null in every
// row, as Delta reads it, so no row of such a file matches.
func (m *FileMatcher) MatchedRows(ctx context.Context, r io.ReaderAt, size int64) (fm FileMatches, rows int64, err error) {
	names := m.Keys
	if m.RT != nil {
		// Files written before the column was named lack it.
		names = append(slices.Clone(m.Keys), m.RT.IDCol)
	}
	rr, err := m.Cols.ReadFile(ctx, r, size, m.Mem, parquetio.ReadOptions{Columns: names, SkipMissing: true})
	if err != nil {
		return fm, 0, fmt.Errorf("delta: upsert: read data file %s: %w", m.File, err)
	}
	defer rr.Release()
	if slices.ContainsFunc(m.Keys, func(k string) bool { return len(rr.Schema().FieldIndices(k)) == 0 }) {
		rows, err := m.nullKeys(rr)
		return fm, rows, err
	}
	if m.enc, err = merge.NewKeyEncoder(rr.Schema(), m.Keys); err == nil && m.Src != nil {
		err = m.Src.SameEncoding(m.enc)
	}
	if err != nil {
		return fm, 0, fmt.Errorf("delta: upsert: data file %s: %w", m.File, err)
	}
	if m.Grp == nil && m.Cache != nil {
		m.index = merge.NewKeyIndex(m.RowsHint)
		if m.RT != nil && len(rr.Schema().FieldIndices(m.RT.IDCol)) > 0 {
			m.matIDs = make([]int64, 0, m.RowsHint)
		}
	}
	for rr.Next() {
		rec := rr.RecordBatch()
		m.first = rows
		ids, idErr := m.idColumn(rec)
		if err := m.match(ctx, rec); err != nil {
			return fm, 0, err
		}
		if idErr != nil {
			// A foreign file's id column of another type fails the upsert
			// only when a matched row needs its id; otherwise the file is
			// just not cached (its ids are unusable).
			if len(m.rows) > 0 {
				return fm, 0, idErr
			}
			m.index, m.matIDs = nil, nil
		}
		for i, row := range m.rows {
			id := int64(noRowID)
			if m.RT != nil {
				id = rowID(materialized(ids, int(row)), m.Base, rows+int64(row))
			}
			fm.add(rows+int64(row), m.ords[i], id, m.RT != nil)
		}
		if m.index != nil && m.matIDs != nil {
			for i := range int(rec.NumRows()) {
				m.matIDs = append(m.matIDs, materialized(ids, i))
			}
		}
		rows += rec.NumRows()
	}
	if err := rr.Err(); err != nil {
		return fm, 0, fmt.Errorf("delta: upsert: read data file %s: %w", m.File, err)
	}
	if m.index != nil {
		// A fresh encoder: the cache keeps the file's key layout, not
		// the last batch's keys.
		enc, err := merge.NewKeyEncoder(rr.Schema(), m.Keys)
		if err != nil {
			return fm, 0, fmt.Errorf("delta: upsert: data file %s: %w", m.File, err)
		}
		fk := m.cacheEntry(rows)
		fk.enc = enc
		if slices.ContainsFunc(m.matIDs, func(id int64) bool { return id != noRowID }) {
			fk.IDs = slices.Clip(m.matIDs) // put charges len, so drop append's spare capacity
		}
		m.Cache.Put(fk)
	}
	return fm, rows, nil
}

// cacheEntry returns the key cache's entry for the file, of rows rows,
// with no key yet.
func (m *FileMatcher) cacheEntry(rows int64) *FileKeys {
	fk := &FileKeys{path: m.File, layout: m.Cols.KeyLayout(m.Keys), index: m.index, rows: rows}
	if m.RT != nil {
		fk.IDCol = m.RT.IDCol
	}
	return fk
}

// nullKeys counts the rows of a file lacking a key column and returns
// them, or the error reading it; without a group it caches the file's
// keys: none (a nil encoder).
func (m *FileMatcher) nullKeys(rr array.RecordReader) (rows int64, err error) {
	for rr.Next() {
		rows += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err != nil {
		return 0, fmt.Errorf("delta: upsert: read data file %s: %w", m.File, err)
	}
	if m.Grp == nil && m.Cache != nil {
		m.index = merge.NewKeyIndex(0)
		m.Cache.Put(m.cacheEntry(rows))
	}
	return rows, nil
}

// idColumn returns rec's materialized row id column, nil when rt is not
// set or the file lacks it.
func (m *FileMatcher) idColumn(rec arrow.RecordBatch) (*array.Int64, error) {
	if m.RT == nil {
		return nil, nil
	}
	idx := rec.Schema().FieldIndices(m.RT.IDCol)
	if len(idx) == 0 {
		return nil, nil
	}
	ids, ok := rec.Column(idx[0]).(*array.Int64)
	if !ok {
		return nil, fmt.Errorf("delta: data file %s: row tracking column %q is %s, not long", m.File, m.RT.IDCol, rec.Column(idx[0]).DataType())
	}
	return ids, nil
}

// materialized returns ids' value at row, noRowID when null or ids is nil.
func materialized(ids *array.Int64, row int) int64 {
	if ids == nil || ids.IsNull(row) {
		return noRowID
	}
	return ids.Value(row)
}

// remember adds the keys of the current batch (m.enc's, at rows of the
// batch, or the rows valid lists) to the file's index; a key seen twice
// abandons it.
func (m *FileMatcher) remember(valid []int32) {
	if m.index == nil {
		return
	}
	for i := range m.enc.Len() {
		row := int64(i)
		if valid != nil {
			row = int64(valid[i])
		}
		if _, dup := m.index.Put(m.enc.Key(i), uint64(m.first+row)); dup {
			m.index, m.matIDs = nil, nil
			return
		}
	}
}

// match sets m.rows and m.ords to the rows of rec whose key is in the
// group and their keys' ordinals. Rows with a null key value never match
// (source keys are never null).
func (m *FileMatcher) match(ctx context.Context, rec arrow.RecordBatch) error {
	m.rows, m.ords = m.rows[:0], m.ords[:0]
	cols := namedColumns(rec, m.Keys)
	n := int(rec.NumRows())
	valid := validRows(cols, n)
	if valid == nil {
		if err := m.enc.EncodeColumns(cols, n); err != nil {
			return fmt.Errorf("delta: upsert: data file %s: %w", m.File, err)
		}
		m.remember(nil)
		if m.Grp != nil {
			m.rows, m.ords = m.Grp.match.MatchRows(m.enc, m.rows, m.ords)
		}
		return nil
	}
	idx := array.NewInt32Builder(m.Mem)
	idx.AppendValues(valid, nil)
	indices := idx.NewInt32Array()
	idx.Release()
	defer indices.Release()
	taken := make([]arrow.Array, len(cols))
	defer func() {
		for _, c := range taken {
			if c != nil {
				c.Release()
			}
		}
	}()
	cctx := compute.WithAllocator(ctx, m.Mem)
	for i, c := range cols {
		var err error
		if taken[i], err = compute.TakeArray(cctx, c, indices); err != nil {
			return fmt.Errorf("delta: upsert: data file %s: key column %q: %w", m.File, m.Keys[i], err)
		}
	}
	if err := m.enc.EncodeColumns(taken, len(valid)); err != nil {
		return fmt.Errorf("delta: upsert: data file %s: %w", m.File, err)
	}
	m.remember(valid)
	if m.Grp == nil {
		return nil
	}
	for i := range m.enc.Len() {
		if ord, ok := m.Grp.match.Find(m.enc.Key(i)); ok {
			m.rows, m.ords = append(m.rows, valid[i]), append(m.ords, int32(ord))
		}
	}
	return nil
}

// validRows returns the rows where no column is null, or nil when no
// column has a null.
func validRows(cols []arrow.Array, n int) []int32 {
	nulls := false
	for _, c := range cols {
		nulls = nulls || c.NullN() > 0
	}
	if !nulls {
		return nil
	}
	valid := make([]int32, 0, n)
	for row := range n {
		ok := true
		for _, c := range cols {
			ok = ok && c.IsValid(row)
		}
		if ok {
			valid = append(valid, int32(row))
		}
	}
	return valid
}
