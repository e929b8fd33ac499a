package delta

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// TestVacuumRacingCommitsLosesNothing: commits, optimize and vacuum with
// no retention interleaved at random on one table lose no acknowledged
// row and acknowledge no version twice (writertest.MaintenanceRace), for
// appends and for upserts with deletion vectors: Delta's vacuum deletes
// only files the snapshot it read removed (or no version references,
// after the untracked age), and never a commit file younger than a week,
// so the race that lost Lance versions does not reach it.
func TestVacuumRacingCommitsLosesNothing(t *testing.T) {
	for _, upsert := range []bool{false, true} {
		name := map[bool]string{false: "append", true: "upsert-dv"}[upsert]
		t.Run(name, func(t *testing.T) {
			writertest.MaintenanceRace(t, writertest.RaceHarness{
				New: func(t *testing.T, mem memory.Allocator) writers.Writer {
					cfg := testConfig(fileURI(t))
					if upsert {
						cfg.WriteMode, cfg.MergeKeys, cfg.DeletionVectors = ModeUpsert, []string{"id"}, true
					}
					return openWriter(t, cfg, mem)
				},
				Rows: func(mem memory.Allocator, from, to, updFrom, updTo int) []arrow.RecordBatch {
					if !upsert {
						return []arrow.RecordBatch{idRecord(mem, writertest.Schema(), from, to-from)}
					}
					rows := idRange(int32(from), int32(to), "new")
					rows = append(rows, idRange(int32(updFrom), int32(updTo), "updated")...)
					return []arrow.RecordBatch{idBatch(mem, rows...)}
				},
				LiveIDs: func(t *testing.T, w writers.Writer) map[int64]int {
					live := map[int64]int{}
					eachLiveBatch(t, w.(*Writer).cfg, memory.DefaultAllocator, func(_ *deltalog.Add, rec arrow.RecordBatch) {
						for r := range int(rec.NumRows()) {
							switch ids := rec.Column(0).(type) {
							case *array.Int64:
								live[ids.Value(r)]++
							case *array.Int32:
								live[int64(ids.Value(r))]++
							}
						}
					})
					return live
				},
				SetDelay: func(w writers.Writer, delay func()) {
					w.(*Writer).bucket.SetFault(storage.Delayed(delay))
				},
				Upserts: upsert,
			})
		})
	}
}
