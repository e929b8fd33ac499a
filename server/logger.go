package server

import (
	"io"
	"log/slog"

	"github.com/quiver-ingest/quiver/server/config"
)

// NewLogger returns the logger the config asks for (log.level, log.format:
// text or json), writing to w.
func NewLogger(w io.Writer, c config.Log) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.SlogLevel()}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
