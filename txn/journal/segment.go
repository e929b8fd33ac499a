package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/quiver-ingest/quiver/internal/fsync"
)

// Segment header: magic, version, flags, reserved (docs/journal-format.md).
const (
	headerBytes   = 16
	magic         = "QJNL"
	formatVersion = 1
	// flagSnapshot marks a segment that begins with the whole live state;
	// recovery starts at the newest one.
	flagSnapshot = 1
)

const (
	segmentSuffix = ".journal"
	tmpSuffix     = ".tmp"
)

func segmentName(seq uint64) string { return fmt.Sprintf("%08d%s", seq, segmentSuffix) }

func appendHeader(b []byte, flags uint32) []byte {
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	b = binary.LittleEndian.AppendUint32(b, flags)
	return binary.LittleEndian.AppendUint32(b, 0)
}

// parseHeader returns the flags of a segment header.
func parseHeader(b []byte) (uint32, error) {
	if len(b) < headerBytes {
		return 0, fmt.Errorf("header: %d bytes, want %d", len(b), headerBytes)
	}
	if string(b[:4]) != magic {
		return 0, fmt.Errorf("header: bad magic %q, want %q", b[:4], magic)
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != formatVersion {
		return 0, fmt.Errorf("header: format version %d, this build reads %d (written by a newer quiver?)", v, formatVersion)
	}
	flags := binary.LittleEndian.Uint32(b[8:])
	if flags&^flagSnapshot != 0 || binary.LittleEndian.Uint32(b[12:]) != 0 {
		return 0, fmt.Errorf("header: reserved bits set (flags %#x)", flags)
	}
	return flags, nil
}

// listSegments returns the sequence numbers of the segments in dir, in
// increasing order, after removing leftover temporary files of an
// interrupted segment creation.
func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, err
			}
			continue
		}
		digits, ok := strings.CutSuffix(name, segmentSuffix)
		if !ok {
			continue
		}
		seq, err := strconv.ParseUint(digits, 10, 64)
		if err != nil {
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, nil
}

// createSegment atomically creates segment seq holding a snapshot header and
// recs: tmp file, write, fsync, rename, fsync dir. It returns the size.
func createSegment(dir string, seq uint64, recs []Record) (int64, error) {
	buf := appendHeader(nil, flagSnapshot)
	for _, r := range recs {
		buf = appendFrame(buf, r)
	}
	final := filepath.Join(dir, segmentName(seq))
	tmp := final + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	_, werr := f.Write(buf)
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		return 0, errors.Join(err, os.Remove(tmp))
	}
	if err := os.Rename(tmp, final); err != nil {
		return 0, errors.Join(err, os.Remove(tmp))
	}
	return int64(len(buf)), fsync.Dir(dir)
}
