package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"golang.org/x/sync/errgroup"

	"github.com/quiver-ingest/quiver/merge"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/parquetio"
)

// mergeOutcome is what mergeInto wrote and read.
type mergeOutcome struct {
	mu        sync.Mutex // guards adds and removes while files are merged concurrently
	adds      []addFile  // rewritten files and live rows
	removes   []string   // paths of the rewritten files
	readFiles []string   // paths of the candidate files whose keys were read
	liveRows  int64
	// deletedKeys counts the changelog's deleted keys (matched or not).
	deletedKeys int64
}

func (o *mergeOutcome) record(removed string, adds []addFile) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if removed != "" {
		o.removes = append(o.removes, removed)
	}
	o.adds = append(o.adds, adds...)
}

// mergeInto applies the collapse res to the table at snap, copy-on-write
// (delta-protocol.md, "Copy-on-write MERGE"):
//
//  1. candidates: active files whose partition values match a source key's
//     partition key values and whose key min/max statistics overlap the
//     source keys' (files without stats are candidates);
//  2. each candidate's key columns alone are read and matched against the
//     source keys; a file without a match is left alone;
//  3. a matched file is read whole and written again without its matched
//     rows (updated or deleted);
//  4. the live rows are written as new files.
//
// Memory stays bounded whatever the table's size: candidates are streamed
// one at a time per worker (at most min(GOMAXPROCS, maxEncoders) at once),
// batch by batch, and only the source keys are indexed. On failure every
// file written is deleted and nothing is returned.
func (w *Writer) mergeInto(ctx context.Context, snap *deltalog.Snapshot, res *merge.Result) (*mergeOutcome, error) {
	groups, err := newKeyGroups(res, w.keyColumns())
	if err != nil {
		return nil, fmt.Errorf("delta: upsert: %w", err)
	}
	out := &mergeOutcome{liveRows: res.LiveRows, deletedKeys: res.DeletedRows}
	var candidates []*deltalog.Add
	for _, a := range snap.Files() {
		grp := groups.forFile(a)
		if grp == nil {
			continue
		}
		st, err := deltalog.ParseStats(a.Stats)
		if err != nil {
			st = nil // unreadable stats never prune
		}
		if grp.mayHold(st, groups.keys.data) {
			candidates = append(candidates, a)
		}
	}
	slices.SortFunc(candidates, func(a, b *deltalog.Add) int { return strings.Compare(a.Path, b.Path) })
	for _, a := range candidates {
		out.readFiles = append(out.readFiles, a.Path)
	}

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(min(runtime.GOMAXPROCS(0), maxEncoders))
	g.Go(func() error {
		adds, err := w.writeLive(gctx, res.Live)
		out.record("", adds)
		return err
	})
	for _, a := range candidates {
		g.Go(func() error {
			adds, rewritten, err := w.mergeFile(gctx, snap, a, groups)
			if rewritten {
				out.record(a.Path, adds)
			} else {
				out.record("", adds) // files of a failed rewrite, for deletion
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, errors.Join(err, w.deleteFiles(ctx, out.adds))
	}
	slices.Sort(out.removes)
	return out, nil
}

// deleteFiles deletes files written for a plan that is abandoned.
func (w *Writer) deleteFiles(ctx context.Context, files []addFile) error {
	s := &stage{finished: files}
	return w.discard(ctx, s)
}

// writeLive writes the live rows (metadata columns stripped) as new files,
// split by partition. It returns the finished files, also on failure (for
// deletion).
func (w *Writer) writeLive(ctx context.Context, live []arrow.RecordBatch) ([]addFile, error) {
	fs := fileSet{open: make(map[string]*dataFile)}
	err := func() error {
		for _, rec := range live {
			parts, recs, err := w.parts.split(ctx, w.mem, rec)
			if err != nil {
				return err
			}
			for i, p := range parts {
				if err == nil {
					err = w.write(ctx, &fs, p.dir, p.values, recs[i])
				}
				recs[i].Release()
			}
			if err != nil {
				return err
			}
		}
		return w.finishAll(&fs)
	}()
	fs.abortAll()
	return fs.finished, err
}

// mergeFile matches the keys of candidate a against the source and, when
// some match, rewrites it without the matched rows. rewritten reports
// whether a is replaced by adds (possibly none: every row matched). On
// failure the files already finished are returned for deletion.
func (w *Writer) mergeFile(ctx context.Context, snap *deltalog.Snapshot, a *deltalog.Add, groups *keyGroups) (adds []addFile, rewritten bool, err error) {
	key, err := deltalog.DecodePath(a.Path)
	if err != nil {
		return nil, false, fmt.Errorf("delta: upsert: file %s: %w", a.Path, err)
	}
	r, size, err := w.bucket.OpenReader(ctx, key)
	if err != nil {
		return nil, false, fmt.Errorf("delta: upsert: open data file %s: %w", key, err)
	}
	defer r.Close()
	grp := groups.forFile(a)
	m := fileMatcher{w: w, grp: grp, keys: groups.keys.data, src: groups.enc, file: a.Path}

	// Pass 1: the key columns alone.
	matched, err := m.scan(ctx, r, size, groups.keys.data, nil)
	if err != nil || matched == 0 {
		return nil, false, err
	}
	// Pass 2: every column, written again without the matched rows.
	fs := fileSet{open: make(map[string]*dataFile)}
	dir := deltalog.PartitionDir(snap.Metadata.PartitionColumns, a.PartitionValues)
	_, err = m.scan(ctx, r, size, nil, func(rec arrow.RecordBatch, matched []int32) error {
		if len(matched) == int(rec.NumRows()) {
			return nil
		}
		if len(matched) == 0 {
			return w.write(ctx, &fs, dir, a.PartitionValues, rec)
		}
		kept, err := take(compute.WithAllocator(ctx, w.mem), w.mem, rec, complement(matched, int(rec.NumRows())))
		if err != nil {
			return err
		}
		defer kept.Release()
		return w.write(ctx, &fs, dir, a.PartitionValues, kept)
	})
	if err == nil {
		err = w.finishAll(&fs)
	}
	fs.abortAll()
	return fs.finished, err == nil, err
}

// fileMatcher finds the rows of one target file whose data keys are
// among a group's source keys.
type fileMatcher struct {
	w    *Writer
	grp  *keyGroup
	keys []string          // data key columns
	src  *merge.KeyEncoder // the source's encoder, for SameEncoding
	file string
	enc  *merge.KeyEncoder
	buf  []int32
}

// scan reads the file (only columns, nil for all), matches each batch and
// hands it with its matched rows (ascending) to fn when fn is set. It
// returns the number of matched rows.
func (m *fileMatcher) scan(ctx context.Context, r io.ReaderAt, size int64, columns []string, fn func(arrow.RecordBatch, []int32) error) (int64, error) {
	rr, err := parquetio.ReadFile(ctx, r, size, m.w.mem, parquetio.ReadOptions{Columns: columns})
	if err != nil {
		return 0, fmt.Errorf("delta: upsert: read data file %s: %w", m.file, err)
	}
	defer rr.Release()
	if m.enc, err = merge.NewKeyEncoder(rr.Schema(), m.keys); err == nil {
		err = m.src.SameEncoding(m.enc)
	}
	if err != nil {
		return 0, fmt.Errorf("delta: upsert: data file %s: %w", m.file, err)
	}
	var n int64
	for rr.Next() {
		rec := rr.RecordBatch()
		if m.buf, err = m.match(ctx, rec, m.buf[:0]); err != nil {
			return 0, err
		}
		n += int64(len(m.buf))
		if fn != nil {
			if err := fn(rec, m.buf); err != nil {
				return 0, err
			}
		}
	}
	if err := rr.Err(); err != nil {
		return 0, fmt.Errorf("delta: upsert: read data file %s: %w", m.file, err)
	}
	return n, nil
}

// match appends to dst the rows of rec whose key is in the group. Rows
// with a null key value never match (source keys are never null).
func (m *fileMatcher) match(ctx context.Context, rec arrow.RecordBatch, dst []int32) ([]int32, error) {
	cols := namedColumns(rec, m.keys)
	n := int(rec.NumRows())
	valid := validRows(cols, n)
	if valid == nil {
		if err := m.enc.EncodeColumns(cols, n); err != nil {
			return nil, fmt.Errorf("delta: upsert: data file %s: %w", m.file, err)
		}
		return m.grp.set.MatchRows(m.enc, dst), nil
	}
	idx := array.NewInt32Builder(m.w.mem)
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
	cctx := compute.WithAllocator(ctx, m.w.mem)
	for i, c := range cols {
		var err error
		if taken[i], err = compute.TakeArray(cctx, c, indices); err != nil {
			return nil, fmt.Errorf("delta: upsert: data file %s: key column %q: %w", m.file, m.keys[i], err)
		}
	}
	if err := m.enc.EncodeColumns(taken, len(valid)); err != nil {
		return nil, fmt.Errorf("delta: upsert: data file %s: %w", m.file, err)
	}
	for i := range m.enc.Len() {
		if _, ok := m.grp.set.Find(m.enc.Key(i)); ok {
			dst = append(dst, valid[i])
		}
	}
	return dst, nil
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

// complement returns the rows of 0..n-1 not in sorted.
func complement(sorted []int32, n int) []int32 {
	out := make([]int32, 0, n-len(sorted))
	j := 0
	for row := range int32(n) {
		if j < len(sorted) && sorted[j] == row {
			j++
			continue
		}
		out = append(out, row)
	}
	return out
}
