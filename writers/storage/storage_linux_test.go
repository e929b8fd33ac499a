package storage

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSyncData: the real fdatasync succeeds on a written file and fails on
// a closed one (the error a background sync must report).
func TestSyncData(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 3<<20)); err != nil {
		t.Fatal(err)
	}
	if err := syncData(f); err != nil {
		t.Fatalf("syncData: %v", err)
	}
	f.Close()
	if err := syncData(f); err == nil {
		t.Fatal("syncData on a closed file: no error")
	}
}

// TestPutIfAbsentTakenWritesNothing: a put-if-absent on a taken file://
// key (a Delta commit that lost its race) answers without writing a
// temporary file first (no write syscall: /proc/self/io's syscw).
func TestPutIfAbsentTakenWritesNothing(t *testing.T) {
	b := mustOpen(t, "file://"+t.TempDir()+"/root", Options{})
	key := "_delta_log/00000000000000000007.json"
	mustPut(t, b, key, "winner")
	fewest := int64(math.MaxInt64) // the runtime may write now and then: the fewest of three
	for range 3 {
		before := writeSyscalls(t)
		if err := b.PutIfAbsent(t.Context(), key, []byte("loser")); !errors.Is(err, ErrAlreadyExists) {
			t.Fatalf("PutIfAbsent of a taken key: %v, want ErrAlreadyExists", err)
		}
		fewest = min(fewest, writeSyscalls(t)-before)
	}
	if fewest != 0 {
		t.Fatalf("PutIfAbsent of a taken key made %d write syscalls, want none", fewest)
	}
	wantContent(t, b, key, "winner")
	wantNoSideFiles(t, b.dir)
}

// writeSyscalls is the process's count of write syscalls so far.
func writeSyscalls(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("/proc/self/io has no syscw")
	return 0
}
