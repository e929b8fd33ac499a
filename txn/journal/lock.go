//go:build unix

package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive flock on dir/LOCK so that a second server on
// the same data_dir fails instead of interleaving appends. The lock lives
// as long as the returned file stays open and ends with the process.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("journal: %s is locked by another process: is another quiver server using this data_dir? stop it or choose another data_dir", dir)
		}
		return nil, fmt.Errorf("journal: lock %s: %w", path, err)
	}
	return f, nil
}

// unlinked reports whether the file fi describes has no name left: its
// directory entry was removed while it was open.
func unlinked(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
