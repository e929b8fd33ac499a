package server

import (
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta"
	"github.com/quiver-ingest/quiver/writers/discard"
	"github.com/quiver-ingest/quiver/writers/kafka"
	"github.com/quiver-ingest/quiver/writers/lance"
)

// Sinks returns the registry of every sink this build offers. A sink
// package joins the build by being listed here; config naming any other
// sink fails with a "not available in this build" error.
func Sinks() *writers.Registry {
	return writers.NewRegistry(discard.Sink(), delta.Sink(), kafka.Sink(), lance.Sink())
}
