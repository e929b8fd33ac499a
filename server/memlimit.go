package server

import (
	"os"
	"runtime/debug"
)

// softLimitHeadroom is what the Go runtime's soft memory limit allows
// beyond limits.memory_bytes: half the budget again (garbage not collected
// yet, sinks over their share while streams wait) plus 128 MiB (gRPC
// buffers, the runtime, everything outside the budget).
func softLimitHeadroom(budget int64) int64 { return budget/2 + 128<<20 }

// gcPercent is the collector's heap growth between collections (GOGC)
// the server runs with, instead of Go's 100. Ingestion makes tens of MB a
// second of short-lived garbage (decoded batches, their encodings), so at
// 100 the collector ran often enough to cost several percent of a Delta
// append's CPU; the soft memory limit still bounds the heap this lets
// grow (docs/operations.md).
const gcPercent = 400

// tuneGC sets the Go runtime's soft memory limit from the budget, so the
// collector works harder before the process outgrows it, and its GC
// percent to gcPercent, unless the operator set GOMEMLIMIT or GOGC, which
// win. It is process-wide: the last server started in a process sets it.
func (s *Server) tuneGC() {
	if _, set := os.LookupEnv("GOGC"); set {
		s.logger.Info("GOGC set: the garbage collector's percent is not the server's default", "default", gcPercent)
	} else {
		debug.SetGCPercent(gcPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		s.logger.Info("GOMEMLIMIT set: the soft memory limit is not derived from limits.memory_bytes")
		return
	}
	limit := s.cfg.Limits.MemoryBytes + softLimitHeadroom(s.cfg.Limits.MemoryBytes)
	debug.SetMemoryLimit(limit)
	s.logger.Info("memory budget", "memory_bytes", s.cfg.Limits.MemoryBytes, "soft_memory_limit", limit)
}
