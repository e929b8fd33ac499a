package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func rec(i int) Record {
	return Record{Type: byte(1 + i%7), Payload: fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, i, bytes.Repeat([]byte("x"), i%13))}
}

// writeRecords opens dir, appends n records and closes it.
func writeRecords(t *testing.T, dir string, n int) {
	t.Helper()
	j, _, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := j.Append(rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func reopen(t *testing.T, dir string) []Record {
	t.Helper()
	j, recs, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return recs
}

func checkRecords(t *testing.T, got []Record, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if want := rec(i); r.Type != want.Type || !bytes.Equal(r.Payload, want.Payload) {
			t.Fatalf("record %d = %d %q, want %d %q", i, r.Type, r.Payload, want.Type, want.Payload)
		}
	}
}

func segPath(dir string) string { return filepath.Join(dir, segmentName(1)) }

func TestAppendAndReopen(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, 20)
	checkRecords(t, reopen(t, dir), 20)
}

func TestConcurrentAppendsShareSyncs(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	j, _, err := Open(dir, Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := j.Append(rec(w*each + i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(segPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	var syncs uint64
	var size float64
	for _, mf := range mfs {
		switch mf.GetName() {
		case "quiver_journal_fsync_seconds":
			syncs = mf.GetMetric()[0].GetHistogram().GetSampleCount()
		case "quiver_journal_bytes":
			size = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	// Every append is synced, some share a sync.
	if syncs == 0 || syncs > writers*each {
		t.Fatalf("%d fsyncs for %d appends", syncs, writers*each)
	}
	t.Logf("%d fsyncs for %d appends", syncs, writers*each)
	if size != float64(st.Size()) {
		t.Fatalf("quiver_journal_bytes = %v, file is %d", size, st.Size())
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(reopen(t, dir)); n != writers*each {
		t.Fatalf("reopened %d records, want %d", n, writers*each)
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, _, err := Open(dir, Options{}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("locked by another process")) {
		t.Fatalf("second Open: %v, want a lock error", err)
	}
}

func TestTornTail(t *testing.T) {
	cases := []struct {
		name string
		// damage edits the segment; want is the number of records left.
		damage func(t *testing.T, path string)
		want   int
	}{
		{"truncated last frame", func(t *testing.T, path string) { chop(t, path, 5) }, 9},
		{"only a partial length word", func(t *testing.T, path string) {
			appendBytes(t, path, []byte{0x20, 0, 0})
		}, 10},
		{"zeroed tail", func(t *testing.T, path string) { appendBytes(t, path, make([]byte, 4096)) }, 10},
		{"garbage frame at the end", func(t *testing.T, path string) {
			appendBytes(t, path, appendFrame(nil, Record{Type: 3, Payload: []byte("lost")})[:20])
		}, 10},
		{"bad crc of the last frame", func(t *testing.T, path string) { flip(t, path, -3) }, 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRecords(t, dir, 10)
			tc.damage(t, segPath(dir))
			checkRecords(t, reopen(t, dir), tc.want)
		})
	}
}

func TestTornTailIsTruncatedForLaterAppends(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, 3)
	appendBytes(t, segPath(dir), make([]byte, 100))
	j, recs, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, 3)
	if err := j.Append(rec(3)); err != nil {
		t.Fatal(err)
	}
	j.Close()
	checkRecords(t, reopen(t, dir), 4)
}

func TestCorruptionInTheMiddle(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, 10)
	// Record 0 starts right after the header; flip a payload byte of it.
	flip(t, segPath(dir), headerBytes+frameHeaderBytes+2)
	_, _, err := Open(dir, Options{})
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("Open: %v, want *CorruptionError", err)
	}
	if ce.Segment != segPath(dir) || ce.Offset != headerBytes {
		t.Fatalf("corruption at %s:%d, want %s:%d", ce.Segment, ce.Offset, segPath(dir), headerBytes)
	}
	if !errors.Is(err, errChecksum) {
		t.Fatalf("cause %v, want a checksum mismatch", ce.Err)
	}
	msg := err.Error()
	if !bytes.Contains([]byte(msg), []byte(segPath(dir))) || !bytes.Contains([]byte(msg), []byte("offset 16")) {
		t.Fatalf("message %q does not name file and offset", msg)
	}
	// Refused, not repaired: the file is unchanged and still refused.
	if _, _, err := Open(dir, Options{}); !errors.As(err, &ce) {
		t.Fatalf("second Open: %v", err)
	}
}

func TestCorruptLengthWithFramesAfter(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, 5)
	f, err := os.OpenFile(segPath(dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(headerBytes + frameSize(1+len(rec(0).Payload)))
	if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, _, err = Open(dir, Options{})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != off || !errors.Is(err, errTooLong) {
		t.Fatalf("Open: %v, want impossible length at %d", err, off)
	}
}

func TestBadHeader(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, 1)
	flip(t, segPath(dir), 1)
	var ce *CorruptionError
	if _, _, err := Open(dir, Options{}); !errors.As(err, &ce) || ce.Offset != 0 {
		t.Fatalf("Open: %v, want corruption at offset 0", err)
	}
}

// faultyFile fails writes after limit bytes, leaving a partial write behind.
type faultyFile struct {
	segmentFile
	limit int
}

var errInjected = errors.New("injected write failure")

func (f *faultyFile) Write(b []byte) (int, error) {
	if len(b) <= f.limit {
		f.limit -= len(b)
		return f.segmentFile.Write(b)
	}
	n, _ := f.segmentFile.Write(b[:f.limit])
	f.limit = 0
	return n, errInjected
}

func TestFileFailingAfterNBytes(t *testing.T) {
	dir := t.TempDir()
	size := frameSize(1 + len(rec(0).Payload))
	j, _, err := Open(dir, Options{wrapFile: func(f segmentFile) segmentFile {
		return &faultyFile{segmentFile: f, limit: 3*size + 5}
	}})
	if err != nil {
		t.Fatal(err)
	}
	var failed int
	for i := range 6 {
		if err := j.Append(rec(0)); err != nil {
			if !errors.Is(err, errInjected) {
				t.Fatalf("append %d: %v", i, err)
			}
			failed++
		}
	}
	if failed != 3 {
		t.Fatalf("%d appends failed, want the last 3 (the file refuses every byte after the limit)", failed)
	}
	j.Close()
	// The partial write was cut off at once: no torn tail to repair.
	if fi, err := os.Stat(segPath(dir)); err != nil || fi.Size() != int64(headerBytes+3*size) {
		t.Fatalf("segment size %v, %v; want %d", fi.Size(), err, headerBytes+3*size)
	}
	if recs := reopen(t, dir); len(recs) != 3 {
		t.Fatalf("recovered %d records, want 3", len(recs))
	}
}

func TestCompactKeepsOnlySnapshot(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := j.Append(rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Compact([]Record{rec(0), rec(1)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(rec(2)); err != nil {
		t.Fatal(err)
	}
	j.Close()
	seqs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 1 || seqs[0] != 2 {
		t.Fatalf("segments %v, want [2]", seqs)
	}
	checkRecords(t, reopen(t, dir), 3)
}

func TestRecoveryStartsAtNewestSnapshot(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, 4)
	// A crash after a compaction renamed its segment but before it
	// deleted the old one leaves both.
	if _, err := createSegment(dir, 2, []Record{rec(0)}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, segmentName(3)+tmpSuffix), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, reopen(t, dir), 1)
	seqs, _ := listSegments(dir)
	if len(seqs) != 1 || seqs[0] != 2 {
		t.Fatalf("segments %v, want [2]", seqs)
	}
}

func TestGoldenSegment(t *testing.T) {
	buf := appendHeader(nil, flagSnapshot)
	buf = appendFrame(buf, Record{Type: 1, Payload: []byte(`{"writer":"w","epoch":1}`)})
	buf = appendFrame(buf, Record{Type: 7, Payload: nil})
	want := []byte{
		'Q', 'J', 'N', 'L', 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
		25, 0, 0, 0, 0, 0, 0, 0, // length: type + 24 payload bytes
	}
	if !bytes.Equal(buf[:len(want)], want) {
		t.Fatalf("header and first length word\n got % x\nwant % x", buf[:len(want)], want)
	}
	if len(buf) != 16+40+16 {
		t.Fatalf("segment is %d bytes, want 72 (frames padded to 8)", len(buf))
	}
}

func chop(t *testing.T, path string, n int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-n); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// flip inverts the byte at off (negative: from the end).
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if off < 0 {
		st, _ := f.Stat()
		off += st.Size()
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
