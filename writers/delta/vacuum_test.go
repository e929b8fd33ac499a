package delta

import (
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog"
	"github.com/quiver-ingest/quiver/writers/delta/deltalog/dv"
)

// TestVacuumRefusesAbsoluteDeletionVectors: a live file whose deletion
// vector lies at an absolute path may keep it under the table root, where
// vacuum would take it for an unreferenced file: vacuum refuses the table.
func TestVacuumRefusesAbsoluteDeletionVectors(t *testing.T) {
	ctx := t.Context()
	b := tableBucket(t, testConfig(memURI(t)))
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	snap, err := deltalog.Create(ctx, b, schema, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	add := &deltalog.Add{Path: "part-0.parquet", DataChange: true,
		DeletionVector: &deltalog.DeletionVector{StorageType: dv.Absolute, PathOrInlineDv: "file:///t/deletion_vector_x.bin"}}
	if _, err := deltalog.Commit(ctx, b, snap, []deltalog.Action{{Add: add}}, deltalog.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if snap, err = deltalog.Load(ctx, b); err != nil {
		t.Fatal(err)
	}
	_, err = vacuumable(ctx, b, snap, time.Now(), time.Hour, time.Hour)
	if !errors.Is(err, writers.ErrInvalid) {
		t.Fatalf("vacuum of a table with an absolute deletion vector: %v, want ErrInvalid", err)
	}
}
