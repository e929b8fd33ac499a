package kafka

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/quiver-ingest/quiver/internal/fsync"
	"github.com/quiver-ingest/quiver/writers"
)

// Staging file format (docs/kafka.md): the 8-byte magic, then frames of
//
//	u32 LE  payload length
//	u32 LE  CRC-32C (Castagnoli) of the payload
//	payload: u8 flags (1 key present, 2 value present, 4 dead-letter record)
//	         uvarint len + key, uvarint len + value,
//	         uvarint header count, per header uvarint len + name, uvarint len + value
//
// The descriptor of a precommitted file carries its size, the CRC-32C of
// the whole file and the record count, so Commit refuses a file that is
// torn, truncated or replaced.
const stageMagic = "QKSTAGE1"

const (
	flagKey   = 1
	flagValue = 2
	flagDLQ   = 4
)

// maxFrame bounds a frame read back, before allocating for it.
const maxFrame = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is one record header.
type header struct{ name, value []byte }

// record is one staged record. A nil key is a keyless record, a nil value
// a tombstone. dlq records go to the dead-letter topic.
type record struct {
	key, value []byte
	headers    []header
	dlq        bool
}

// appendFrame appends r's frame to dst.
func appendFrame(dst []byte, r record) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, 8)...)
	var flags byte
	if r.key != nil {
		flags |= flagKey
	}
	if r.value != nil {
		flags |= flagValue
	}
	if r.dlq {
		flags |= flagDLQ
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(len(r.key)))
	dst = append(dst, r.key...)
	dst = binary.AppendUvarint(dst, uint64(len(r.value)))
	dst = append(dst, r.value...)
	dst = binary.AppendUvarint(dst, uint64(len(r.headers)))
	for _, h := range r.headers {
		dst = binary.AppendUvarint(dst, uint64(len(h.name)))
		dst = append(dst, h.name...)
		dst = binary.AppendUvarint(dst, uint64(len(h.value)))
		dst = append(dst, h.value...)
	}
	payload := dst[start+8:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli))
	return dst
}

// stageWriter appends frames to an open staging file. Not safe for
// concurrent use (Write of one key is never concurrent with itself).
type stageWriter struct {
	f       *os.File
	bw      *bufio.Writer
	crc     uint32
	size    int64
	records int64
}

func createStage(path string) (*stageWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, writers.Errorf(writers.ErrUnavailable, "kafka: create staging file: %w (check data_dir is writable)", err)
	}
	s := &stageWriter{f: f, bw: bufio.NewWriterSize(f, 1<<20)}
	if err := s.append([]byte(stageMagic), 0); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// append writes frames holding n records; the caller built them whole, so
// a batch is staged entirely or (on error) the stage is unusable.
func (s *stageWriter) append(frames []byte, n int) error {
	if _, err := s.bw.Write(frames); err != nil {
		return writers.Errorf(writers.ErrUnavailable, "kafka: write staging file %s: %w (check free space in data_dir)", s.f.Name(), err)
	}
	s.crc = crc32.Update(s.crc, castagnoli, frames)
	s.size += int64(len(frames))
	s.records += int64(n)
	return nil
}

// finish flushes the file, fsyncs it when durable, closes it and renames
// it to final (then fsyncs the folder, so the name survives a crash).
func (s *stageWriter) finish(final string, durable bool) error {
	err := s.bw.Flush()
	if err == nil && durable {
		err = s.f.Sync()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(s.f.Name(), final)
	}
	if err == nil && durable {
		err = fsync.Dir(filepath.Dir(final))
	}
	if err != nil {
		return writers.Errorf(writers.ErrUnavailable, "kafka: make staging file %s durable: %w (check data_dir)", final, err)
	}
	return nil
}

// discard closes and removes the file.
func (s *stageWriter) discard() error {
	s.f.Close()
	return removeIfExists(s.f.Name())
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("kafka: remove staging file: %w", err)
	}
	return nil
}

// readStage calls fn for every record of the precommitted file d
// describes, after checking its size; the CRC of the whole file and the
// record count are checked at the end, before returning nil. The bytes of
// the records passed to fn are never reused (they are carved from fresh
// 1 MiB slabs), so fn may hand them to an asynchronous producer.
func readStage(d descriptor, fn func(record) error) error {
	f, err := os.Open(d.path)
	if errors.Is(err, os.ErrNotExist) {
		return writers.Errorf(writers.ErrInvalid, "kafka: staging file %s is gone: the transaction was rolled back or committed elsewhere; replay the epoch", d.path)
	}
	if err != nil {
		return writers.Errorf(writers.ErrUnavailable, "kafka: open staging file: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != d.Size {
		return writers.Errorf(writers.ErrInvalid, "kafka: staging file %s does not have the descriptor's size %d (torn or replaced): replay the epoch", d.path, d.Size)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	crc := uint32(0)
	magic := make([]byte, len(stageMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != stageMagic {
		return corrupt(d, 0, "bad magic")
	}
	crc = crc32.Update(crc, castagnoli, magic)
	off, n := int64(len(magic)), int64(0)
	var head [8]byte
	var slab []byte
	for off < d.Size {
		if _, err := io.ReadFull(br, head[:]); err != nil {
			return corrupt(d, off, "torn frame header")
		}
		size := binary.LittleEndian.Uint32(head[:4])
		if size > maxFrame || off+8+int64(size) > d.Size {
			return corrupt(d, off, "frame length beyond the file")
		}
		if cap(slab)-len(slab) < int(size) {
			slab = make([]byte, 0, max(1<<20, int(size)))
		}
		end := len(slab) + int(size)
		buf := slab[len(slab):end:end]
		slab = slab[:end]
		if _, err := io.ReadFull(br, buf); err != nil {
			return corrupt(d, off, "torn frame")
		}
		if crc32.Checksum(buf, castagnoli) != binary.LittleEndian.Uint32(head[4:]) {
			return corrupt(d, off, "frame checksum mismatch")
		}
		crc = crc32.Update(crc32.Update(crc, castagnoli, head[:]), castagnoli, buf)
		r, err := parseFrame(buf)
		if err != nil {
			return corrupt(d, off, err.Error())
		}
		if err := fn(r); err != nil {
			return err
		}
		off += 8 + int64(size)
		n++
	}
	if crc != d.CRC || n != d.Records {
		return corrupt(d, off, fmt.Sprintf("file checksum or record count differs from the descriptor (%d records, want %d)", n, d.Records))
	}
	return nil
}

func corrupt(d descriptor, off int64, what string) error {
	return writers.Errorf(writers.ErrInvalid, "kafka: staging file %s is corrupt at offset %d: %s; nothing was produced: roll back and replay the epoch", d.path, off, what)
}

// parseFrame decodes a frame payload; slices alias p.
func parseFrame(p []byte) (record, error) {
	if len(p) < 1 {
		return record{}, errors.New("empty frame")
	}
	flags, p := p[0], p[1:]
	field := func() ([]byte, error) {
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return nil, errors.New("bad field length")
		}
		v := p[n : n+int(l) : n+int(l)]
		p = p[n+int(l):]
		return v, nil
	}
	var r record
	var err error
	if r.key, err = field(); err != nil {
		return r, err
	}
	if r.value, err = field(); err != nil {
		return r, err
	}
	if flags&flagKey == 0 {
		r.key = nil
	} else if r.key == nil {
		r.key = []byte{}
	}
	if flags&flagValue == 0 {
		r.value = nil
	} else if r.value == nil {
		r.value = []byte{}
	}
	r.dlq = flags&flagDLQ != 0
	nh, n := binary.Uvarint(p)
	if n <= 0 || nh > uint64(len(p)) {
		return r, errors.New("bad header count")
	}
	p = p[n:]
	for range nh {
		var h header
		if h.name, err = field(); err != nil {
			return r, err
		}
		if h.value, err = field(); err != nil {
			return r, err
		}
		r.headers = append(r.headers, h)
	}
	if len(p) != 0 {
		return r, errors.New("trailing bytes")
	}
	return r, nil
}
