package journal

import (
	"io"
	"os"
)

// segmentFile is the active segment as the appender sees it. Tests wrap it
// to inject failures (Options.wrapFile).
type segmentFile interface {
	io.Writer
	// Sync makes the written bytes durable (fdatasync where available).
	Sync() error
	// Truncate cuts off the bytes of failed appends.
	Truncate(size int64) error
	// Stat tells whether the file still has a name (see unlinked).
	Stat() (os.FileInfo, error)
	Close() error
}

// osSegment is a segment file on disk.
type osSegment struct{ *os.File }

func (s osSegment) Sync() error { return datasync(s.File) }
