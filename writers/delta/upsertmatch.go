package delta

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
// row ids, which the rows that replace them keep (rowids.go): the
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

// fileMatches are the rows of one target file whose key is among a
// group's source keys, ascending by position.
type fileMatches struct {
	pos []int64 // positions in the file
	ord []int32 // their keys' ordinals in the group's set
	ids []int64 // their row ids (noRowID: none); nil unless asked for
}

func (fm *fileMatches) len() int { return len(fm.pos) }

// add appends the row at position pos, of key ordinal ord and row id id
// (kept when ids are asked for).
func (fm *fileMatches) add(pos int64, ord int32, id int64, ids bool) {
	fm.pos, fm.ord = append(fm.pos, pos), append(fm.ord, ord)
	if ids {
		fm.ids = append(fm.ids, id)
	}
}

// without drops the rows at the positions of drop (ascending): the rows a
// deletion vector already marks.
func (fm *fileMatches) without(drop []int64) {
	if len(drop) == 0 {
		return
	}
	n, j := 0, 0
	for i, p := range fm.pos {
		for j < len(drop) && drop[j] < p {
			j++
		}
		if j < len(drop) && drop[j] == p {
			continue
		}
		fm.pos[n], fm.ord[n] = p, fm.ord[i]
		if fm.ids != nil {
			fm.ids[n] = fm.ids[i]
		}
		n++
	}
	fm.pos, fm.ord = fm.pos[:n], fm.ord[:n]
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

// matches answers matchedRows for file a from the key cache when it
// holds a's keys, read under the table's key layout, in the source's
// encoding (and, when rt is set, the materialized row ids of its column).
// A lookup in the cache costs fewer probes than reading the file would,
// whatever the sizes: it probes from the smaller side (fileKeys.lookup).
func (c *keyCache) matches(a *deltalog.Add, layout string, grp *keyGroup, src *merge.KeyEncoder, rt *deltalayout.RowTracking) (fm fileMatches, rows int64, ok bool) {
	if c == nil {
		return fm, 0, false
	}
	fk := c.get(a.Path, layout)
	if fk == nil || fk.enc != nil && src.SameEncoding(fk.enc) != nil || rt != nil && fk.idCol != rt.IDCol {
		return fm, 0, false
	}
	return fk.lookup(grp.set, a.BaseRowID, rt != nil), fk.rows, true
}

// fileMatcher finds the rows of one target file whose data keys are
// among a group's source keys. Without a group (and source) it indexes
// the file's keys into the key cache instead (warmKeys): building an
// index costs more than matching, so a precommit only matches and leaves
// the indexing to the background after its commit.
type fileMatcher struct {
	cache *keyCache              // indexes the file's keys into it (without a group); nil: none
	mem   memory.Allocator       // for what it reads and builds
	cols  *deltalayout.ColumnMap // the table's column mapping (nil without)
	grp   *keyGroup
	keys  []string          // data key columns
	src   *merge.KeyEncoder // the source's encoder, for SameEncoding
	file  string
	// rt, when set, has the row ids found too: matched rows' ids, or the
	// materialized ones for the index. base is the file's baseRowId.
	rt   *deltalayout.RowTracking
	base *int64
	enc  *merge.KeyEncoder
	rows []int32 // of the current batch: the matched rows
	ords []int32 // the matched rows' key ordinals
	// index collects the file's keys for the key cache (without a group);
	// nil when matching, or once the file turned out to hold a key twice.
	// matIDs collects the file's materialized row ids for it (rt set and
	// the file has the column).
	index    *merge.KeyIndex
	matIDs   []int64
	rowsHint int   // the file's rows by its stats (0: unknown), to size index
	first    int64 // file position of the current batch's first row
}

// matchedRows reads the data key columns of the file (and, with rt, its
// materialized row id column) and returns its rows whose key is among the
// group's, and the file's row count; without a group it indexes the
// file's keys into the writer's key cache instead. A key column the file
// lacks (added to the table after the file was written) is null in every
// row, as Delta reads it, so no row of such a file matches.
func (m *fileMatcher) matchedRows(ctx context.Context, r io.ReaderAt, size int64) (fm fileMatches, rows int64, err error) {
	names := m.keys
	if m.rt != nil {
		// Files written before the column was named lack it.
		names = append(slices.Clone(m.keys), m.rt.IDCol)
	}
	rr, err := m.cols.ReadFile(ctx, r, size, m.mem, parquetio.ReadOptions{Columns: names, SkipMissing: true})
	if err != nil {
		return fm, 0, fmt.Errorf("delta: upsert: read data file %s: %w", m.file, err)
	}
	defer rr.Release()
	if slices.ContainsFunc(m.keys, func(k string) bool { return len(rr.Schema().FieldIndices(k)) == 0 }) {
		rows, err := m.nullKeys(rr)
		return fm, rows, err
	}
	if m.enc, err = merge.NewKeyEncoder(rr.Schema(), m.keys); err == nil && m.src != nil {
		err = m.src.SameEncoding(m.enc)
	}
	if err != nil {
		return fm, 0, fmt.Errorf("delta: upsert: data file %s: %w", m.file, err)
	}
	if m.grp == nil && m.cache != nil {
		m.index = merge.NewKeyIndex(m.rowsHint)
		if m.rt != nil && len(rr.Schema().FieldIndices(m.rt.IDCol)) > 0 {
			m.matIDs = make([]int64, 0, m.rowsHint)
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
			if m.rt != nil {
				id = rowID(materialized(ids, int(row)), m.base, rows+int64(row))
			}
			fm.add(rows+int64(row), m.ords[i], id, m.rt != nil)
		}
		if m.index != nil && m.matIDs != nil {
			for i := range int(rec.NumRows()) {
				m.matIDs = append(m.matIDs, materialized(ids, i))
			}
		}
		rows += rec.NumRows()
	}
	if err := rr.Err(); err != nil {
		return fm, 0, fmt.Errorf("delta: upsert: read data file %s: %w", m.file, err)
	}
	if m.index != nil {
		// A fresh encoder: the cache keeps the file's key layout, not
		// the last batch's keys.
		enc, err := merge.NewKeyEncoder(rr.Schema(), m.keys)
		if err != nil {
			return fm, 0, fmt.Errorf("delta: upsert: data file %s: %w", m.file, err)
		}
		fk := m.cacheEntry(rows)
		fk.enc = enc
		if slices.ContainsFunc(m.matIDs, func(id int64) bool { return id != noRowID }) {
			fk.ids = slices.Clip(m.matIDs) // put charges len, so drop append's spare capacity
		}
		m.cache.put(fk)
	}
	return fm, rows, nil
}

// cacheEntry returns the key cache's entry for the file, of rows rows,
// with no key yet.
func (m *fileMatcher) cacheEntry(rows int64) *fileKeys {
	fk := &fileKeys{path: m.file, layout: m.cols.KeyLayout(m.keys), index: m.index, rows: rows}
	if m.rt != nil {
		fk.idCol = m.rt.IDCol
	}
	return fk
}

// nullKeys counts the rows of a file lacking a key column and returns
// them, or the error reading it; without a group it caches the file's
// keys: none (a nil encoder).
func (m *fileMatcher) nullKeys(rr array.RecordReader) (rows int64, err error) {
	for rr.Next() {
		rows += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err != nil {
		return 0, fmt.Errorf("delta: upsert: read data file %s: %w", m.file, err)
	}
	if m.grp == nil && m.cache != nil {
		m.index = merge.NewKeyIndex(0)
		m.cache.put(m.cacheEntry(rows))
	}
	return rows, nil
}

// idColumn returns rec's materialized row id column, nil when rt is not
// set or the file lacks it.
func (m *fileMatcher) idColumn(rec arrow.RecordBatch) (*array.Int64, error) {
	if m.rt == nil {
		return nil, nil
	}
	idx := rec.Schema().FieldIndices(m.rt.IDCol)
	if len(idx) == 0 {
		return nil, nil
	}
	ids, ok := rec.Column(idx[0]).(*array.Int64)
	if !ok {
		return nil, fmt.Errorf("delta: data file %s: row tracking column %q is %s, not long", m.file, m.rt.IDCol, rec.Column(idx[0]).DataType())
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
func (m *fileMatcher) remember(valid []int32) {
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
func (m *fileMatcher) match(ctx context.Context, rec arrow.RecordBatch) error {
	m.rows, m.ords = m.rows[:0], m.ords[:0]
	cols := namedColumns(rec, m.keys)
	n := int(rec.NumRows())
	valid := validRows(cols, n)
	if valid == nil {
		if err := m.enc.EncodeColumns(cols, n); err != nil {
			return fmt.Errorf("delta: upsert: data file %s: %w", m.file, err)
		}
		m.remember(nil)
		if m.grp != nil {
			m.rows, m.ords = m.grp.match.MatchRows(m.enc, m.rows, m.ords)
		}
		return nil
	}
	idx := array.NewInt32Builder(m.mem)
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
	cctx := compute.WithAllocator(ctx, m.mem)
	for i, c := range cols {
		var err error
		if taken[i], err = compute.TakeArray(cctx, c, indices); err != nil {
			return fmt.Errorf("delta: upsert: data file %s: key column %q: %w", m.file, m.keys[i], err)
		}
	}
	if err := m.enc.EncodeColumns(taken, len(valid)); err != nil {
		return fmt.Errorf("delta: upsert: data file %s: %w", m.file, err)
	}
	m.remember(valid)
	if m.grp == nil {
		return nil
	}
	for i := range m.enc.Len() {
		if ord, ok := m.grp.match.Find(m.enc.Key(i)); ok {
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
