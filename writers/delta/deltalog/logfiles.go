package deltalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/quiver-ingest/quiver/writers/storage"
)

// LogDir is the log directory under the table root.
const LogDir = "_delta_log/"

// CommitKey is the storage key of the commit file of version v.
func CommitKey(v int64) string { return fmt.Sprintf("%s%020d.json", LogDir, v) }

// CheckpointKey is the storage key of the classic checkpoint of version v.
func CheckpointKey(v int64) string { return fmt.Sprintf("%s%020d.checkpoint.parquet", LogDir, v) }

const lastCheckpointKey = LogDir + "_last_checkpoint"

var (
	commitRe     = regexp.MustCompile(`^(\d{20})\.json$`)
	checkpointRe = regexp.MustCompile(`^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$`)
)

// checkpointSet is one usable-looking checkpoint: a classic file or the
// parts of a multi-part set (complete only when every part is listed).
type checkpointSet struct {
	version int64
	total   int            // 1 for classic
	parts   map[int]string // part number (1-based) → key
}

func (c *checkpointSet) complete() bool { return len(c.parts) == c.total }

// keys returns the keys of the parts listed, in part order (sized by
// them: a part's name may claim up to 9,999,999,999 parts).
func (c *checkpointSet) keys() []string {
	out := make([]string, 0, len(c.parts))
	for _, i := range slices.Sorted(maps.Keys(c.parts)) {
		out = append(out, c.parts[i])
	}
	return out
}

// parseVersion parses the 20 digits of a log file name, ok false when
// they pass the largest version (a name no writer makes).
func parseVersion(digits string) (int64, bool) {
	v, err := strconv.ParseInt(digits, 10, 64)
	return v, err == nil
}

// logListing is what a listing of _delta_log found.
type logListing struct {
	commits     map[int64]string
	checkpoints map[int64][]*checkpointSet // by version; classic and multi-part sets
}

// listLog lists _delta_log after startAfter (a full key, or "" for all),
// keeping commit files and classic, multi-part and UUID-named (V2)
// checkpoints. Hidden files, sub-directories (.tmp/, _sidecars/,
// _commits/), .crc and compacted files are ignored.
//
// A listing that fails because an object vanished under it (a concurrent
// writer's temporary file, seen by file:// as "does not exist") is retried
// a few times: a log with live writers is the normal case.
func listLog(ctx context.Context, store Store, startAfter string) (*logListing, error) {
	for attempt := 1; ; attempt++ {
		l, err := listLogOnce(ctx, store, startAfter)
		if err == nil || attempt == 3 || !errors.Is(err, storage.ErrNotExist) {
			return l, err
		}
	}
}

func listLogOnce(ctx context.Context, store Store, startAfter string) (*logListing, error) {
	l := &logListing{commits: map[int64]string{}, checkpoints: map[int64][]*checkpointSet{}}
	multi := map[string]*checkpointSet{} // "version/total" → set
	for obj, err := range store.List(ctx, LogDir, startAfter) {
		if err != nil {
			return nil, StorageError("list", LogDir, err)
		}
		l.add(obj.Key, multi)
	}
	return l, nil
}

// add records key when it is a commit file or a checkpoint (part); multi
// collects the multi-part sets by "version/total".
func (l *logListing) add(key string, multi map[string]*checkpointSet) {
	name, ok := strings.CutPrefix(key, LogDir)
	if !ok || strings.Contains(name, "/") || strings.HasPrefix(name, ".") {
		return
	}
	if m := commitRe.FindStringSubmatch(name); m != nil {
		if v, ok := parseVersion(m[1]); ok {
			l.commits[v] = key
		}
		return
	}
	if m := v2CheckpointRe.FindStringSubmatch(name); m != nil {
		if v, ok := parseVersion(m[1]); ok {
			l.checkpoints[v] = append(l.checkpoints[v], &checkpointSet{version: v, total: 1, parts: map[int]string{1: key}})
		}
		return
	}
	m := checkpointRe.FindStringSubmatch(name)
	if m == nil {
		return
	}
	v, ok := parseVersion(m[1])
	if !ok {
		return
	}
	if m[2] == "" {
		l.checkpoints[v] = append(l.checkpoints[v], &checkpointSet{version: v, total: 1, parts: map[int]string{1: key}})
		return
	}
	part, _ := strconv.Atoi(m[2])
	total, _ := strconv.Atoi(m[3])
	if total < 1 || part < 1 || part > total {
		return
	}
	id := m[1] + "/" + m[3]
	set := multi[id]
	if set == nil {
		set = &checkpointSet{version: v, total: total, parts: map[int]string{}}
		multi[id] = set
		l.checkpoints[v] = append(l.checkpoints[v], set)
	}
	set.parts[part] = key
}

// maxLastCheckpointBytes bounds _last_checkpoint, a small JSON object
// read at every load.
const maxLastCheckpointBytes = 1 << 20

// lastCheckpointHint reads _last_checkpoint. It is only a hint: a missing,
// unreadable or corrupt file yields ok=false and the caller lists the whole
// log.
func lastCheckpointHint(ctx context.Context, store Store) (version int64, ok bool) {
	data, err := store.GetMax(ctx, lastCheckpointKey, maxLastCheckpointBytes)
	if err != nil {
		return 0, false
	}
	var h struct {
		Version *int64 `json:"version"`
	}
	if json.Unmarshal(data, &h) != nil || h.Version == nil || *h.Version < 0 {
		return 0, false
	}
	return *h.Version, true
}

// lastCheckpoint is the _last_checkpoint content this package writes.
type lastCheckpoint struct {
	Version       int64 `json:"version"`
	Size          int64 `json:"size"`
	SizeInBytes   int64 `json:"sizeInBytes"`
	NumOfAddFiles int64 `json:"numOfAddFiles"`
}
