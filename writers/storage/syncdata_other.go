//go:build !linux

package storage

import "os"

// syncData makes f's data durable (fsync where fdatasync is not offered).
// A variable, for tests to fail it.
var syncData = (*os.File).Sync
