package deltalog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quiver-ingest/quiver/writers/storage"
)

// DeletedFileRetention is the table's delta.deletedFileRetentionDuration
// when it sets a valid one (ok false otherwise: the default of a week
// applies to checkpoints' tombstones).
func DeletedFileRetention(s *Snapshot) (time.Duration, bool) {
	return parseInterval(s.Metadata.Configuration["delta.deletedFileRetentionDuration"])
}

// LogRetention is the table's delta.logRetentionDuration, or def when it
// sets none (or an invalid one).
func LogRetention(s *Snapshot, def time.Duration) time.Duration {
	if d, ok := parseInterval(s.Metadata.Configuration["delta.logRetentionDuration"]); ok {
		return d
	}
	return def
}

// ExpiredLogFiles lists the log files Spark's metadata cleanup deletes at
// now: every commit and checkpoint file of a version below the newest
// complete checkpoint written before now-retention, itself older than
// now-retention, and the V2 checkpoint sidecars older than now-retention
// that no checkpoint from that one on names. The state at that checkpoint
// and after stays readable; versions before it can no longer be read
// (time travel ends there).
func ExpiredLogFiles(ctx context.Context, store Store, now time.Time, retention time.Duration) ([]storage.Object, error) {
	cutoff := now.Add(-retention)
	var objs []storage.Object
	for obj, err := range store.List(ctx, LogDir, "") {
		if err != nil {
			return nil, StorageError("list", LogDir, err)
		}
		objs = append(objs, obj)
	}
	// The newest checkpoint older than the cutoff that holds a whole
	// state: one that does not (incomplete, unreadable, degenerate) would
	// leave nothing to load once the commits below it are gone.
	l := &logListing{commits: map[int64]string{}, checkpoints: map[int64][]*checkpointSet{}}
	multi := map[string]*checkpointSet{}
	for _, obj := range objs {
		if obj.ModTime.After(cutoff) {
			continue
		}
		l.add(obj.Key, multi)
	}
	floor, err := newestReadableCheckpoint(ctx, store, l)
	if err != nil {
		return nil, err
	}
	if floor <= 0 {
		return nil, nil
	}
	kept, err := keptSidecars(ctx, store, objs, floor)
	if err != nil {
		return nil, err
	}
	var out []storage.Object
	for _, obj := range objs {
		if obj.ModTime.After(cutoff) {
			continue
		}
		if v, ok := logFileVersion(obj.Key); ok && v < floor {
			out = append(out, obj)
		} else if strings.HasPrefix(obj.Key, SidecarDir) && !kept[obj.Key] {
			out = append(out, obj)
		}
	}
	return out, nil
}

// newestReadableCheckpoint returns the version of the newest checkpoint
// of l that readCheckpoint accepts, -1 when none does.
func newestReadableCheckpoint(ctx context.Context, store Store, l *logListing) (int64, error) {
	versions := slices.Sorted(maps.Keys(l.checkpoints))
	slices.Reverse(versions)
	for _, v := range versions {
		for _, set := range l.checkpoints[v] {
			if !set.complete() {
				continue
			}
			if _, err := readCheckpoint(ctx, store, v, set.keys()); err == nil {
				return v, nil
			} else if ctx.Err() != nil {
				return 0, ctx.Err()
			}
		}
	}
	return -1, nil
}

// keptSidecars returns the sidecar keys that the checkpoints at or above
// floor (those log cleanup keeps) name. A checkpoint that cannot be read,
// or names a sidecar path that does not resolve to a key, fails the
// cleanup: deleting sidecars it may name could break it.
func keptSidecars(ctx context.Context, store Store, objs []storage.Object, floor int64) (map[string]bool, error) {
	l := &logListing{commits: map[int64]string{}, checkpoints: map[int64][]*checkpointSet{}}
	multi := map[string]*checkpointSet{}
	hasSidecars := false
	for _, obj := range objs {
		l.add(obj.Key, multi)
		hasSidecars = hasSidecars || strings.HasPrefix(obj.Key, SidecarDir)
	}
	kept := map[string]bool{}
	if !hasSidecars {
		return kept, nil
	}
	for v, sets := range l.checkpoints {
		if v < floor {
			continue
		}
		for _, set := range sets {
			if set.total > 1 {
				continue // only V2 checkpoints (one file) name sidecars
			}
			for _, key := range set.keys() {
				f, err := readCheckpointFile(ctx, store, key, maxLogObjectBytes)
				if err != nil {
					return nil, fmt.Errorf("delta: log cleanup: %w", err)
				}
				for _, sc := range f.sidecars {
					k, err := SidecarKey(store, sc.Path)
					if err != nil {
						return nil, fmt.Errorf("delta: log cleanup: checkpoint %s: %w", key, err)
					}
					kept[k] = true
				}
			}
		}
	}
	return kept, nil
}

// logFileVersion is the version of a commit, checkpoint (classic or part)
// or .crc file of the log.
func logFileVersion(key string) (int64, bool) {
	name, ok := strings.CutPrefix(key, LogDir)
	if !ok || strings.Contains(name, "/") || len(name) < 21 || name[20] != '.' {
		return 0, false
	}
	for _, c := range name[:20] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, ok := parseVersion(name[:20])
	if !ok {
		return 0, false
	}
	rest := name[20:]
	if rest == ".json" || rest == ".crc" || checkpointRe.MatchString(name) || v2CheckpointRe.MatchString(name) {
		return v, true
	}
	return 0, false
}
