//go:build !linux

package journal

import "os"

// datasync falls back to fsync where fdatasync is not offered.
func datasync(f *os.File) error { return f.Sync() }
