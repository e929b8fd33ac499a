package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/quiver-ingest/quiver/server"
	"github.com/quiver-ingest/quiver/server/config"
)

// startQuiver runs a real server with the discard endpoint "devnull" on
// 127.0.0.1:0, shut down at cleanup with a checked allocator left empty,
// and returns its Flight address.
func startQuiver(t *testing.T) string {
	t.Helper()
	return startQuiverServer(t).FlightAddr()
}

// startQuiverServer is startQuiver returning the server.
func startQuiverServer(t *testing.T) *server.Server {
	t.Helper()
	return startQuiverWith(t, "endpoints:\n  - name: devnull\n    sink: discard\n")
}

// startQuiverWith is startQuiverServer with the config's endpoints
// section, whose files go under a temporary folder.
func startQuiverWith(t *testing.T, endpoints string) *server.Server {
	t.Helper()
	dir := t.TempDir()
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nhttp_listen: 127.0.0.1:0\ndata_dir: %s\n%s", dir, endpoints)
	cfg, err := config.Parse([]byte(yaml), dir, server.Sinks())
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	srv, err := server.New(cfg, server.Options{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		mem.AssertSize(t, 0)
	})
	return srv
}

// runCmd runs one quiver command line and returns its exit status, stdout
// and stderr.
func runCmd(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// inputBatches returns n batches of rows rows with an id and a name column.
func inputBatches(t *testing.T, schema *arrow.Schema, n, rows int) []arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	var recs []arrow.RecordBatch
	for range n {
		for i := range rows {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprint("row-", i))
		}
		recs = append(recs, b.NewRecordBatch())
	}
	t.Cleanup(func() {
		for _, r := range recs {
			r.Release()
		}
	})
	return recs
}

// writeInput writes recs to dir/name in format ("arrow-file",
// "arrow-stream" or "parquet") and returns the path.
func writeInput(t *testing.T, dir, name, format string, schema *arrow.Schema, recs []arrow.RecordBatch) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	switch format {
	case "arrow-file":
		if w, err = ipc.NewFileWriter(f, ipc.WithSchema(schema)); err != nil {
			t.Fatal(err)
		}
	case "arrow-stream":
		w = ipc.NewWriter(f, ipc.WithSchema(schema))
	case "parquet":
		if w, err = pqarrow.NewFileWriter(schema, f, nil, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown format %q", format)
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
