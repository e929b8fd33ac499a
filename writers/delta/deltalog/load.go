package deltalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/storage"
)

// Load reads the latest snapshot of the table. It does not check the
// protocol: call CheckReadable or CheckWritable before using the data.
// Errors: ErrTableNotFound when there is no log, ErrCorrupt (version gap,
// missing protocol/metaData, malformed commit), writers.ErrUnavailable for
// storage failures. ctx bounds the whole load.
func Load(ctx context.Context, store Store) (*Snapshot, error) {
	return LoadVersion(ctx, store, -1)
}

// LoadVersion reads the snapshot at version (time travel); a negative
// version means the latest. A version beyond the latest wraps
// writers.ErrNotFound.
//
// Replay starts from the newest complete checkpoint ≤ version:
// _last_checkpoint is used as a hint to list the log from there; when it is
// missing, corrupt or stale, or its checkpoint cannot be read, the whole
// log is listed. Incomplete multi-part checkpoints are ignored, as is any
// unreadable checkpoint when an older one (or version 0) can serve.
func LoadVersion(ctx context.Context, store Store, version int64) (*Snapshot, error) {
	if hint, ok := lastCheckpointHint(ctx, store); ok && (version < 0 || hint <= version) {
		l, err := listLog(ctx, store, fmt.Sprintf("%s%020d", LogDir, hint))
		if err != nil {
			return nil, err
		}
		if s, err := replayListing(ctx, store, l, version, true); err == nil {
			return s, nil
		} else if ctx.Err() != nil {
			return nil, err
		}
	}
	l, err := listLog(ctx, store, "")
	if err != nil {
		return nil, err
	}
	return replayListing(ctx, store, l, version, false)
}

// replayListing builds the snapshot at version from a listing. With
// needCheckpoint (a listing that starts at a hint) it fails unless a
// checkpoint in the listing can be read.
func replayListing(ctx context.Context, store Store, l *logListing, version int64, needCheckpoint bool) (*Snapshot, error) {
	latest := int64(-1)
	for v := range l.commits {
		latest = max(latest, v)
	}
	for v := range l.checkpoints {
		latest = max(latest, v)
	}
	if latest < 0 {
		return nil, fmt.Errorf("delta: no commits in %s: %w", LogDir, ErrTableNotFound)
	}
	if version < 0 {
		version = latest
	}
	if version > latest {
		return nil, writers.Errorf(writers.ErrNotFound, "delta: version %d does not exist (latest is %d)", version, latest)
	}
	s, err := snapshotFromCheckpoint(ctx, store, l, version)
	if err != nil {
		return nil, err
	}
	if s == nil {
		if needCheckpoint {
			return nil, fmt.Errorf("delta: no readable checkpoint after the hint: %w", ErrCorrupt)
		}
		s = newSnapshot()
	}
	for v := s.Version + 1; v <= version; v++ {
		actions, err := readListed(ctx, store, l, v)
		if err != nil {
			return nil, err
		}
		s.apply(v, actions)
	}
	if !s.hasProtocol || !s.hasMetadata {
		return nil, fmt.Errorf("delta: no protocol or metaData found at version %d: %w", version, ErrCorrupt)
	}
	return s, nil
}

// snapshotFromCheckpoint returns the state of the newest readable
// checkpoint ≤ version, or nil when there is none.
func snapshotFromCheckpoint(ctx context.Context, store Store, l *logListing, version int64) (*Snapshot, error) {
	versions := slices.Sorted(maps.Keys(l.checkpoints))
	slices.Reverse(versions)
	for _, v := range versions {
		if v > version {
			continue
		}
		for _, set := range l.checkpoints[v] {
			if !set.complete() {
				continue
			}
			actions, err := readCheckpoint(ctx, store, v, set.keys())
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				continue // another set or an older checkpoint may serve
			}
			s := newSnapshot()
			s.apply(v, actions)
			return s, nil
		}
	}
	return nil, nil
}

// ReadCommit reads and decodes the commit file of version v. A missing
// commit wraps storage.ErrNotExist.
func ReadCommit(ctx context.Context, store Store, v int64) ([]Action, error) {
	key := CommitKey(v)
	data, err := store.GetMax(ctx, key, maxLogObjectBytes)
	if err != nil {
		return nil, StorageError("read", key, err)
	}
	actions, err := DecodeCommit(data)
	if err != nil {
		return nil, fmt.Errorf("delta: %s: %w", key, err)
	}
	return actions, nil
}

// readCheckpoint reads every part of the checkpoint of version v, and the
// sidecars a V2 checkpoint names, and checks that they hold a whole state:
// a UUID-named file has a checkpointMetadata, any checkpointMetadata names
// v, and the checkpoint holds exactly one protocol and one metaData.
// Anything else (a file truncated at a line boundary, an empty one) is
// ErrCorrupt: replay then falls back to an older checkpoint or the
// commits, and log cleanup never takes it as its floor.
func readCheckpoint(ctx context.Context, store Store, v int64, keys []string) ([]Action, error) {
	var out []Action
	for _, key := range keys {
		f, err := readCheckpointFile(ctx, store, key, maxLogObjectBytes)
		if err != nil {
			return nil, err
		}
		named := v2CheckpointRe.MatchString(strings.TrimPrefix(key, LogDir))
		if (named && f.meta == nil) || (f.meta != nil && *f.meta != v) {
			return nil, fmt.Errorf("delta: checkpoint %s has no checkpointMetadata of version %d: %w", key, v, ErrCorrupt)
		}
		out = append(out, f.actions...)
		if len(f.sidecars) > 0 {
			files, err := readV2Sidecars(ctx, store, f.sidecars)
			if err != nil {
				return nil, err
			}
			out = append(out, files...)
		}
	}
	protocols, metas := 0, 0
	for _, a := range out {
		if a.Protocol != nil {
			protocols++
		}
		if a.MetaData != nil {
			metas++
		}
	}
	if protocols != 1 || metas != 1 {
		return nil, fmt.Errorf("delta: checkpoint %v holds %d protocol and %d metaData actions, not one each: %w", keys, protocols, metas, ErrCorrupt)
	}
	return out, nil
}

// maxLogObjectBytes bounds a commit or checkpoint file, read whole: far
// above what a table of tens of millions of files needs (a checkpoint
// spends a few hundred bytes per file), it stops a hostile object from
// being read without end.
const maxLogObjectBytes = 16 << 30

// readCheckpointFile reads one checkpoint file of at most limit bytes,
// Parquet or (V2) JSON: its actions, the sidecars it names and its
// checkpointMetadata.
func readCheckpointFile(ctx context.Context, store Store, key string, limit int64) (checkpointFile, error) {
	data, err := store.GetMax(ctx, key, limit)
	if err != nil {
		return checkpointFile{}, StorageError("read", key, err)
	}
	if strings.HasSuffix(key, ".json") {
		return readJSONCheckpoint(key, data)
	}
	// Read whole: its layout is checked against the bytes present before
	// parquet-go sizes anything by it.
	f, err := openParquetCheckpoint(key, data)
	if err != nil {
		return checkpointFile{}, err
	}
	maxRows := maxCheckpointRows(len(data))
	if f.NumRows() > int64(maxRows) {
		return checkpointFile{}, fmt.Errorf("delta: checkpoint %s: %d rows in %d bytes, more than %d: %w", key, f.NumRows(), len(data), maxRows, ErrCorrupt)
	}
	cf := checkpointFile{size: len(data)}
	if err := readParquetV2(f, key, &cf); err != nil {
		return checkpointFile{}, err
	}
	pr := parquet.NewGenericReader[cpRow](f)
	defer pr.Close()
	rows := make([]cpRow, 256)
	read := 0 // the footer's count is a claim: the pages are counted too
	for {
		n, err := pr.Read(rows)
		if read += n; read > maxRows {
			return checkpointFile{}, fmt.Errorf("delta: checkpoint %s: more than %d rows in %d bytes: %w", key, maxRows, len(data), ErrCorrupt)
		}
		for i := range rows[:n] {
			a, aerr := rows[i].action()
			if aerr != nil {
				return checkpointFile{}, fmt.Errorf("delta: checkpoint %s: %w", key, aerr)
			}
			if !a.empty() {
				cf.actions = append(cf.actions, a)
			}
			rows[i] = cpRow{}
		}
		if errors.Is(err, io.EOF) {
			return cf, nil
		}
		if err != nil {
			return checkpointFile{}, fmt.Errorf("delta: checkpoint %s: %w: %w", key, ErrCorrupt, err)
		}
		if err := ctx.Err(); err != nil {
			return checkpointFile{}, err
		}
	}
}

// maxCheckpointRows bounds the rows of a Parquet checkpoint file of size
// bytes. Every action a writer checkpoints carries something of its own (a
// path, an app id), which costs bytes even compressed; run-length and
// dictionary pages can claim millions of identical rows in a few bytes,
// which would be decoded and held.
func maxCheckpointRows(size int) int { return 2*size + 4096 }

// Update returns the snapshot at the latest version, replaying only the
// commits after s.Version (s itself is unchanged). When the log no longer
// holds those commits contiguously (cleaned up), it loads from scratch.
func (s *Snapshot) Update(ctx context.Context, store Store) (*Snapshot, error) {
	newer, err := commitsAfter(ctx, store, s.Version)
	var gap *gapError
	if errors.As(err, &gap) {
		return Load(ctx, store)
	}
	if err != nil {
		return nil, err
	}
	if len(newer) == 0 {
		return s, nil
	}
	c := s.clone()
	for i, actions := range newer {
		c.apply(s.Version+1+int64(i), actions)
	}
	return c, nil
}

// commitsAfter reads the commits after version v, in order, up to the
// newest one listed; a commit before that one that is really absent is a
// *gapError.
func commitsAfter(ctx context.Context, store Store, v int64) ([][]Action, error) {
	l, err := listLog(ctx, store, CommitKey(v))
	if err != nil {
		return nil, err
	}
	latest := v
	for c := range l.commits {
		latest = max(latest, c)
	}
	out := [][]Action{}
	for next := v + 1; next <= latest; next++ {
		actions, err := readListed(ctx, store, l, next)
		if err != nil {
			return nil, err
		}
		out = append(out, actions)
	}
	return out, nil
}

// readListed reads commit v, which a later commit in listing l follows.
// A version missing from the listing is read all the same: a directory
// listing racing with commits being created may show v+1 and not v. Only
// a commit file that is really absent is a gap.
func readListed(ctx context.Context, store Store, l *logListing, v int64) ([]Action, error) {
	_, listed := l.commits[v]
	actions, err := ReadCommit(ctx, store, v)
	if !listed && errors.Is(err, storage.ErrNotExist) {
		return nil, &gapError{version: v}
	}
	return actions, err
}

// gapError: commit version is absent from the log while later commits
// exist, so no snapshot after it can be built (ErrCorrupt).
type gapError struct{ version int64 }

func (e *gapError) Error() string {
	return fmt.Sprintf("delta: versions are not contiguous: version %d is missing while later commits exist; restore %s from a backup of the table (readers and writers refuse the table until then)",
		e.version, CommitKey(e.version))
}

func (e *gapError) Unwrap() error { return ErrCorrupt }
