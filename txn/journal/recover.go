package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// CorruptionError reports a journal that cannot be read: a record that is
// unreadable although valid records follow it, or a bad segment header.
// The server must not start on it: restore the data_dir or move the
// segment aside after inspecting it.
type CorruptionError struct {
	// Segment is the path of the segment file.
	Segment string
	// Offset is the byte offset of the unreadable frame or header.
	Offset int64
	Err    error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("journal: corrupt segment %s at offset %d: %v (the server refuses to start: restore the journal from a backup or move the segment aside)", e.Segment, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// readSegments reads the segments seqs (oldest first) from the newest one
// carrying a snapshot on, deleting the older ones. It truncates a torn tail
// of the last segment. It returns the records, the sequence numbers kept,
// and the size of each kept segment.
func readSegments(dir string, seqs []uint64, logger *slog.Logger) ([]Record, []uint64, []int64, error) {
	datas := make([][]byte, len(seqs))
	start := -1
	for i := len(seqs) - 1; i >= 0; i-- {
		path := filepath.Join(dir, segmentName(seqs[i]))
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("journal: read segment: %w", err)
		}
		flags, err := parseHeader(data)
		if err != nil {
			return nil, nil, nil, &CorruptionError{Segment: path, Offset: 0, Err: err}
		}
		datas[i] = data
		if flags&flagSnapshot != 0 {
			start = i
			break
		}
	}
	if start < 0 {
		path := filepath.Join(dir, segmentName(seqs[0]))
		return nil, nil, nil, &CorruptionError{Segment: path, Offset: 0, Err: errors.New("no segment starts with a snapshot")}
	}
	for _, seq := range seqs[:start] {
		path := filepath.Join(dir, segmentName(seq))
		logger.Info("journal: removing segment superseded by a snapshot", "segment", path)
		if err := os.Remove(path); err != nil {
			return nil, nil, nil, fmt.Errorf("journal: remove superseded segment: %w", err)
		}
	}
	seqs, datas = seqs[start:], datas[start:]
	var recs []Record
	sizes := make([]int64, len(seqs))
	for i, data := range datas {
		path := filepath.Join(dir, segmentName(seqs[i]))
		last := i == len(datas)-1
		got, end, err := readFrames(path, data, last)
		if err != nil {
			return nil, nil, nil, err
		}
		recs = append(recs, got...)
		sizes[i] = end
		if end < int64(len(data)) {
			logger.Warn("journal: truncating torn tail left by a crash", "segment", path, "offset", end, "dropped_bytes", int64(len(data))-end)
			if err := truncate(path, end); err != nil {
				return nil, nil, nil, fmt.Errorf("journal: truncate torn tail of %s: %w", path, err)
			}
		}
	}
	return recs, seqs, sizes, nil
}

// readFrames decodes the frames of one segment. It returns the records and
// the offset where the readable frames end. An unreadable frame is a torn
// tail (end < len(data)) only in the last segment and only when no valid
// frame follows it; otherwise it is a *CorruptionError.
func readFrames(path string, data []byte, last bool) ([]Record, int64, error) {
	var recs []Record
	off := headerBytes
	for off < len(data) {
		r, n, err := decodeFrame(data[off:])
		if err == nil {
			recs = append(recs, r)
			off += n
			continue
		}
		if !last || validFrameAfter(data, off+8) {
			return nil, 0, &CorruptionError{Segment: path, Offset: int64(off), Err: err}
		}
		return recs, int64(off), nil
	}
	return recs, int64(off), nil
}

// validFrameAfter reports whether any 8-byte aligned offset from off on
// holds a frame with a matching checksum, which tells corruption (good
// records after a bad one) from a torn tail (nothing readable after it).
func validFrameAfter(data []byte, off int) bool {
	for off = (off + 7) &^ 7; off+frameHeaderBytes < len(data); off += 8 {
		if _, _, err := decodeFrame(data[off:]); err == nil {
			return true
		}
	}
	return false
}

func truncate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}
