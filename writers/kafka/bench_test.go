package kafka_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers/kafka"
)

// BenchmarkCommitAuto measures one auto-commit stream of a 10,000-row
// batch end to end (JSON encoding, producing to kfake with murmur2 keys in
// the stream's transaction, every delivery report, the Kafka commit).
// Bytes are the record key and value bytes; kfake shares the machine, so
// compare runs, not clusters.
func BenchmarkCommitAuto(b *testing.B) {
	const rows = 10_000
	mem := memory.NewGoAllocator()
	c := startCluster(b)
	w := openWriter(b, newConfig(c, uniqueTopic("bench"), func(cfg *kafka.Config) {
		cfg.KeyColumn = "user"
		cfg.CreateTopic = &kafka.CreateTopic{Partitions: 6, ReplicationFactor: 1}
	}), b.TempDir(), mem)
	var js strings.Builder
	js.WriteString("[")
	for i := range rows {
		if i > 0 {
			js.WriteString(",")
		}
		fmt.Fprintf(&js, `{"user":"user-%d","n":%d}`, i, i)
	}
	js.WriteString("]")
	rec := record(b, mem, rowsSchema, js.String())
	var bytes int64
	for i := range rows {
		bytes += int64(len(fmt.Sprintf("user-%d", i)) + len(fmt.Sprintf(`{"user":"user-%d","n":%d}`, i, i)))
	}
	b.SetBytes(bytes)
	b.ReportAllocs()
	for b.Loop() {
		if err := commitAuto(b, w, rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "records/s")
}
