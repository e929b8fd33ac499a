package journal

import (
	"io"
	"os"
)

// segmentFile is the active segment as the appender sees it. Tests wrap it
// to fail after N bytes (Options.wrapFile).
type segmentFile interface {
	io.Writer
	// Sync makes the written bytes durable (fdatasync where available).
	Sync() error
	Close() error
}

// osSegment is a segment file on disk.
type osSegment struct{ *os.File }

func (s osSegment) Sync() error { return datasync(s.File) }
