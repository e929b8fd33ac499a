package deltalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
)

// defaultDeletedFileRetention is delta.deletedFileRetentionDuration's
// default: tombstones younger than this stay in checkpoints (VACUUM needs
// them).
const defaultDeletedFileRetention = 7 * 24 * time.Hour

// WriteCheckpoint writes the classic single-file Parquet checkpoint of s
// (protocol, metaData, txns, live adds with their stats JSON, unexpired
// remove tombstones, live domain metadata) at
// _delta_log/<version>.checkpoint.parquet, then overwrites
// _last_checkpoint. Writing a checkpoint for a version that already has
// one is harmless (same content). s must be the complete state at
// s.Version (from Load/Update, or a successful Commit). Errors wrap
// writers.ErrUnavailable (storage) and never affect committed data.
func WriteCheckpoint(ctx context.Context, store Store, s *Snapshot, now time.Time) error {
	rows := checkpointRows(s, now)
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[cpRow](&buf, parquet.Compression(&snappy.Codec{}),
		// Not parquet-go's DELTA_LENGTH_BYTE_ARRAY default, which Spark's
		// vectorized reader refuses or garbles (SPARK-52240).
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.Plain))
	if _, err := w.Write(rows); err != nil {
		return fmt.Errorf("delta: checkpoint %d: encode: %w", s.Version, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("delta: checkpoint %d: encode: %w", s.Version, err)
	}
	key := CheckpointKey(s.Version)
	size := int64(buf.Len())
	if err := store.Put(ctx, key, buf.Bytes()); err != nil {
		return storageErr("write", key, err)
	}
	hint, err := json.Marshal(lastCheckpoint{Version: s.Version, Size: int64(len(rows)), SizeInBytes: size, NumOfAddFiles: int64(len(s.files))})
	if err != nil {
		return fmt.Errorf("delta: _last_checkpoint: %w", err)
	}
	if err := store.Put(ctx, lastCheckpointKey, hint); err != nil {
		return storageErr("write", lastCheckpointKey, err)
	}
	return nil
}

func checkpointRows(s *Snapshot, now time.Time) []cpRow {
	rows := []cpRow{
		checkpointRow(Action{Protocol: &s.Protocol}),
		checkpointRow(Action{MetaData: &s.Metadata}),
	}
	for _, t := range s.txns {
		rows = append(rows, checkpointRow(Action{Txn: &t}))
	}
	for _, d := range s.Domains() {
		rows = append(rows, checkpointRow(Action{DomainMetadata: &d}))
	}
	for _, a := range s.Files() {
		rows = append(rows, checkpointRow(Action{Add: a}))
	}
	cutoff := now.Add(-tombstoneRetention(s)).UnixMilli()
	for _, r := range s.Tombstones() {
		if r.DeletionTimestamp != nil && *r.DeletionTimestamp < cutoff {
			continue
		}
		rows = append(rows, checkpointRow(Action{Remove: r}))
	}
	return rows
}

// tombstoneRetention reads delta.deletedFileRetentionDuration
// ("interval 7 days" style); anything unparsable keeps the default.
func tombstoneRetention(s *Snapshot) time.Duration {
	if d, ok := parseInterval(s.Metadata.Configuration["delta.deletedFileRetentionDuration"]); ok {
		return d
	}
	return defaultDeletedFileRetention
}

// parseInterval parses Spark's CalendarInterval strings as Delta writes
// them: "interval <n> <unit>" (unit weeks, days, hours, minutes, seconds,
// plural or not).
func parseInterval(s string) (time.Duration, bool) {
	var n int64
	var unit string
	if _, err := fmt.Sscanf(s, "interval %d %s", &n, &unit); err != nil || n < 0 {
		return 0, false
	}
	units := map[string]time.Duration{
		"week": 7 * 24 * time.Hour, "day": 24 * time.Hour, "hour": time.Hour,
		"minute": time.Minute, "second": time.Second,
	}
	if len(unit) > 1 && unit[len(unit)-1] == 's' {
		unit = unit[:len(unit)-1]
	}
	d, ok := units[unit]
	return time.Duration(n) * d, ok
}
