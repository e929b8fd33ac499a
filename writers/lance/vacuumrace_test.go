package lance

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/storage"
	"github.com/quiver-ingest/quiver/writers/writertest"
)

// TestVacuumRacingCommitsLosesNothing: commits, optimize and vacuum with
// no retention interleaved at random on one dataset lose no acknowledged
// row and acknowledge no version twice (writertest.MaintenanceRace), in
// append and in merge_insert mode (whose updates write deletion files).
// Before vacuum kept the versions committed after the one it planned
// against, and held commits off while deleting manifests, both failed
// within a few seeds: rows lost, versions acknowledged twice, "read
// deletion file of fragment N: object does not exist".
func TestVacuumRacingCommitsLosesNothing(t *testing.T) {
	for _, mode := range []string{ModeAppend, ModeMergeInsert} {
		t.Run(mode, func(t *testing.T) {
			writertest.MaintenanceRace(t, writertest.RaceHarness{
				New: func(t *testing.T, mem memory.Allocator) writers.Writer {
					cfg := NewConfig()
					cfg.DatasetURI = "file://" + t.TempDir()
					if mode == ModeMergeInsert {
						cfg.WriteMode, cfg.On = ModeMergeInsert, []string{"id"}
					}
					return openWriter(t, cfg, mem)
				},
				Rows: func(mem memory.Allocator, from, to, updFrom, updTo int) []arrow.RecordBatch {
					recs := []arrow.RecordBatch{scenarioRows(mem, from, to)}
					if updTo > updFrom {
						recs = append(recs, scenarioRows(mem, updFrom, updTo))
					}
					return recs
				},
				LiveIDs: func(t *testing.T, w writers.Writer) map[int64]int {
					live := map[int64]int{}
					eachLiveRecord(t, w.(*Writer), memory.DefaultAllocator, func(rec arrow.RecordBatch) {
						ids := rec.Column(0).(*array.Int64)
						for r := range ids.Len() {
							live[ids.Value(r)]++
						}
					})
					return live
				},
				SetDelay: func(w writers.Writer, delay func()) {
					w.(*Writer).bucket.SetFault(storage.Delayed(delay))
				},
				Upserts: mode == ModeMergeInsert,
			})
		})
	}
}
