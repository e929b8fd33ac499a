package discard_test

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

func published(_ *testing.T, w writers.Writer) int64 { return w.(*discard.Writer).Committed().Rows }

func peer(_ *testing.T, w writers.Writer) writers.Writer { return w.(*discard.Writer).Peer() }

func TestConformance(t *testing.T) {
	writertest.Run(t, writertest.Harness{
		New:       func(*testing.T, memory.Allocator) writers.Writer { return discard.New(nil) },
		Published: published,
		Peer:      peer,
	})
}

// With a fixed schema the writer is a SchemaReporter, which runs the
// schema-mismatch subtest, and its first stream cannot define the schema.
func TestConformanceWithSchema(t *testing.T) {
	writertest.Run(t, writertest.Harness{
		New:         func(*testing.T, memory.Allocator) writers.Writer { return discard.New(writertest.Schema()) },
		Published:   published,
		Peer:        peer,
		FixedSchema: true,
	})
}

func TestSink(t *testing.T) {
	s := discard.Sink()
	if s.Name != "discard" || s.Section != "" {
		t.Fatalf("Sink() = {Name: %q, Section: %q}, want discard without a section", s.Name, s.Section)
	}
	cfg := s.NewConfig()
	if err := cfg.Validate(); err != nil || cfg.Mode() != "" {
		t.Fatalf("config: Validate() = %v, Mode() = %q; want nil and \"\"", err, cfg.Mode())
	}
	w, err := s.New(cfg, writers.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if sch, _ := writers.SchemaOf(t.Context(), w); sch != nil {
		t.Fatalf("a configured discard endpoint reports schema %v, want none", sch)
	}
}

func TestCommitRejectsForeignDescriptor(t *testing.T) {
	w := discard.New(nil)
	_, err := w.Commit(t.Context(), writers.TxnKey{Writer: "w", Epoch: 1}, []writers.Descriptor{[]byte("not json")})
	if !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("Commit of a foreign descriptor: %v, want ErrInvalid", err)
	}
	if _, ok, _ := w.CommittedEpoch(t.Context(), "w"); ok {
		t.Fatal("a failed Commit recorded the epoch")
	}
}
