package kafka_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/kafka"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

func TestConformance(t *testing.T) { forPlainClusters(t, testConformance) }

func testConformance(t *testing.T, c cluster) {
	type sinkOf struct {
		cfg *kafka.Config
		dir string
	}
	sinks := map[writers.Writer]sinkOf{}
	writertest.Run(t, writertest.Harness{
		New: func(t *testing.T, mem memory.Allocator) writers.Writer {
			cfg := newConfig(c, uniqueTopic("conf"), func(cfg *kafka.Config) {
				cfg.CreateTopic = &kafka.CreateTopic{Partitions: 3, ReplicationFactor: 1}
			})
			s := sinkOf{cfg: cfg, dir: t.TempDir()}
			w := openWriter(t, cfg, s.dir, mem)
			sinks[w] = s
			return w
		},
		Published: func(t *testing.T, w writers.Writer) int64 {
			return int64(len(readCommitted(t, c.Addrs(), sinks[w].cfg.Topic)))
		},
		Peer: func(t *testing.T, w writers.Writer) writers.Writer {
			s := sinks[w]
			p := openWriter(t, s.cfg, s.dir, memory.DefaultAllocator)
			sinks[p] = s
			return p
		},
	})
}
