package flightsvc_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
)

// workloadBatch builds one batch of the standard bench workload (see the
// bench harness): id, ts, user_id, amount, score, name, category, active.
func workloadBatch(mem memory.Allocator, rows int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "user_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "category", Type: arrow.BinaryTypes.String},
		{Name: "active", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	name := make([]byte, 24)
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(start + int64(i)))
		b.Field(2).(*array.Int64Builder).Append(rng.Int64N(1_000_000))
		b.Field(3).(*array.Float64Builder).Append(rng.Float64() * 1000)
		b.Field(4).(*array.Float64Builder).Append(rng.Float64())
		n := 8 + rng.IntN(17)
		for j := range n {
			name[j] = byte('a' + rng.IntN(26))
		}
		b.Field(5).(*array.StringBuilder).BinaryBuilder.Append(name[:n])
		b.Field(6).(*array.StringBuilder).Append(string(rune('A' + rng.IntN(16))))
		b.Field(7).(*array.BooleanBuilder).Append(rng.IntN(2) == 0)
	}
	return b.NewRecordBatch()
}

// BenchmarkDoPutDiscard measures one auto-commit DoPut stream of 65,536-row
// batches over real gRPC on loopback into the discard sink: the baseline
// every sink is compared with. The sub-benchmark flightsql sends the same
// stream as a Flight SQL CommandStatementIngest (arrow-go's flightsql
// client), which should cost the same.
func BenchmarkDoPutDiscard(b *testing.B) {
	const (
		rowsPerBatch     = 65_536
		batchesPerStream = 8
	)
	for _, kind := range []string{"doput", "flightsql"} {
		b.Run(kind, func(b *testing.B) {
			s := startServer(b, serverConfig{})
			rec := workloadBatch(s.mem, rowsPerBatch)
			defer rec.Release()
			recs := make([]arrow.RecordBatch, batchesPerStream)
			for i := range recs {
				recs[i] = rec
			}
			send := func() error {
				_, err := s.putRecords(b.Context(), pathDesc("events"), rec.Schema(), recs...)
				return err
			}
			if kind == "flightsql" {
				send = func() error {
					rdr, err := array.NewRecordReader(rec.Schema(), recs)
					if err != nil {
						return err
					}
					defer rdr.Release()
					_, err = s.sqlClient().ExecuteIngest(b.Context(), rdr, ingestOpts("events"))
					return err
				}
			}
			b.SetBytes(util.TotalRecordSize(rec) * batchesPerStream)
			b.ReportAllocs()
			for b.Loop() {
				if err := send(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rowsPerBatch*batchesPerStream*b.N)/b.Elapsed().Seconds(), "rows/s")
			if got, want := s.sinks["events"].Committed().Rows, int64(rowsPerBatch*batchesPerStream*b.N); got != want {
				b.Fatalf("committed %d rows, want %d", got, want)
			}
		})
	}
}
