package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing n bytes of f at off to
// disk. It is a hint: it makes nothing durable, and when it fails (a file
// system without sync_file_range) nothing changes, since Close's fsync is
// what counts.
var startWriteback = func(f *os.File, off, n int64) { _ = queueWriteback(f, off, n) }

// queueWriteback is sync_file_range with SYNC_FILE_RANGE_WRITE: it queues
// the range's dirty pages for writing and returns without waiting.
func queueWriteback(f *os.File, off, n int64) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := c.Control(func(fd uintptr) {
		werr = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	}); err != nil {
		return err
	}
	return werr
}
