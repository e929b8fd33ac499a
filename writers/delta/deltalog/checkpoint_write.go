package deltalog

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// defaultDeletedFileRetention is delta.deletedFileRetentionDuration's
// default: tombstones younger than this stay in checkpoints (VACUUM needs
// them).
const defaultDeletedFileRetention = 7 * 24 * time.Hour

// WriteCheckpoint writes the checkpoint of s (protocol, metaData, txns,
// live adds with their stats JSON, unexpired remove tombstones, live
// domain metadata), then overwrites _last_checkpoint. Tables with V2
// checkpoints (V2Checkpoints) get a UUID-named JSON V2 checkpoint with
// every action inline; others the classic single-file Parquet checkpoint
// at _delta_log/<version>.checkpoint.parquet. Writing a checkpoint for a
// version that already has one is harmless (same content). s must be the
// complete state at s.Version (from Load/Update, or a successful Commit).
// Errors wrap writers.ErrUnavailable (storage) and never affect committed
// data.
func WriteCheckpoint(ctx context.Context, store Store, s *Snapshot, now time.Time) error {
	var (
		size, n int64
		err     error
	)
	if V2Checkpoints(s) {
		_, size, n, err = writeV2Checkpoint(ctx, store, s, now)
	} else {
		size, n, err = writeClassicCheckpoint(ctx, store, s, now)
	}
	if err != nil {
		return err
	}
	hint, err := json.Marshal(lastCheckpoint{Version: s.Version, Size: n, SizeInBytes: size, NumOfAddFiles: int64(len(s.files))})
	if err != nil {
		return fmt.Errorf("delta: _last_checkpoint: %w", err)
	}
	if err := store.Put(ctx, lastCheckpointKey, hint); err != nil {
		return StorageError("write", lastCheckpointKey, err)
	}
	return nil
}

// writeClassicCheckpoint writes the classic Parquet checkpoint of s and
// returns its size and action count.
func writeClassicCheckpoint(ctx context.Context, store Store, s *Snapshot, now time.Time) (int64, int64, error) {
	actions := checkpointActions(s, now)
	data, err := encodeClassicCheckpoint(memory.DefaultAllocator, actions)
	if err != nil {
		return 0, 0, fmt.Errorf("delta: checkpoint %d: encode: %w", s.Version, err)
	}
	key := CheckpointKey(s.Version)
	if err := store.Put(ctx, key, data); err != nil {
		return 0, 0, StorageError("write", key, err)
	}
	return int64(len(data)), int64(len(actions)), nil
}

// checkpointActions lists the actions a checkpoint of s holds.
func checkpointActions(s *Snapshot, now time.Time) []Action {
	actions := []Action{{Protocol: &s.Protocol}, {MetaData: &s.Metadata}}
	for _, t := range s.txns {
		actions = append(actions, Action{Txn: &t})
	}
	for _, d := range s.Domains() {
		actions = append(actions, Action{DomainMetadata: &d})
	}
	for _, a := range s.Files() {
		actions = append(actions, Action{Add: a})
	}
	cutoff := now.Add(-tombstoneRetention(s)).UnixMilli()
	for _, r := range s.Tombstones() {
		if r.DeletionTimestamp != nil && *r.DeletionTimestamp < cutoff {
			continue
		}
		// A checkpoint's tombstones only stop files from reappearing:
		// their stats and tags stay in the commits (as Spark writes them).
		rm := *r
		rm.Stats, rm.Tags = "", nil
		actions = append(actions, Action{Remove: &rm})
	}
	return actions
}

// tombstoneRetention reads delta.deletedFileRetentionDuration
// ("interval 7 days" style); anything unparsable keeps the default.
func tombstoneRetention(s *Snapshot) time.Duration {
	if d, ok := parseInterval(s.Metadata.Configuration["delta.deletedFileRetentionDuration"]); ok {
		return d
	}
	return defaultDeletedFileRetention
}

// parseInterval parses the interval strings Delta's duration properties
// hold, as Spark reads them: "interval 7 days", "INTERVAL 1 WEEK",
// "1 day 12 hours" — an optional "interval", then one or more "<n> <unit>"
// (week, day, hour, minute, second, millisecond, microsecond; plural or
// not; any case). Anything else is not an interval (ok false). A total
// beyond time.Duration's range saturates: "interval 365000 days" means
// keep for good, never a negative retention.
func parseInterval(s string) (time.Duration, bool) {
	fields := strings.Fields(strings.ToLower(s))
	if len(fields) > 0 && fields[0] == "interval" {
		fields = fields[1:]
	}
	if len(fields) == 0 || len(fields)%2 != 0 {
		return 0, false
	}
	units := map[string]time.Duration{
		"week": 7 * 24 * time.Hour, "day": 24 * time.Hour, "hour": time.Hour, "minute": time.Minute,
		"second": time.Second, "millisecond": time.Millisecond, "microsecond": time.Microsecond,
	}
	var total time.Duration
	for i := 0; i < len(fields); i += 2 {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		unit, ok := units[strings.TrimSuffix(fields[i+1], "s")]
		if err != nil || n < 0 || !ok {
			return 0, false
		}
		if n > int64((math.MaxInt64-total)/unit) {
			return math.MaxInt64, true
		}
		total += time.Duration(n) * unit
	}
	return total, true
}
