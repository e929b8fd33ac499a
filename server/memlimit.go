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

// setSoftMemoryLimit sets the Go runtime's soft memory limit from the
// budget, so the collector works harder before the process outgrows it,
// unless the operator set GOMEMLIMIT, which wins. It is process-wide: the
// last server started in a process sets it.
func (s *Server) setSoftMemoryLimit() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		s.logger.Info("GOMEMLIMIT set: the soft memory limit is not derived from limits.memory_bytes")
		return
	}
	limit := s.cfg.Limits.MemoryBytes + softLimitHeadroom(s.cfg.Limits.MemoryBytes)
	debug.SetMemoryLimit(limit)
	s.logger.Info("memory budget", "memory_bytes", s.cfg.Limits.MemoryBytes, "soft_memory_limit", limit)
}
