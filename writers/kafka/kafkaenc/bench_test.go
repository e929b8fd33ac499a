package kafkaenc

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/bench/workload"
)

// BenchmarkEncode encodes 64k rows of the standard workload as the Kafka
// sink does: JSON values (ISO timestamps), Avro values, and the id keys.
func BenchmarkEncode(b *testing.B) {
	recs, err := workload.Generate(memory.DefaultAllocator, workload.DefaultSeed, 1<<16, 1<<16)
	if err != nil {
		b.Fatal(err)
	}
	defer workload.ReleaseAll(recs)
	rec := recs[0]
	j, err := NewJSON(rec.Schema(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	a, err := NewAvro(rec.Schema(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	k, err := NewKeys(rec.Schema(), "id")
	if err != nil {
		b.Fatal(err)
	}
	for _, enc := range []struct {
		name string
		enc  interface {
			Encode(arrow.RecordBatch, *Batch) error
		}
	}{{"json", j}, {"avro", a}, {"keys", k}} {
		b.Run(enc.name, func(b *testing.B) {
			var out Batch
			for b.Loop() {
				out.Reset()
				if err := enc.enc.Encode(rec, &out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rec.NumRows()), "ns/row")
		})
	}
}
