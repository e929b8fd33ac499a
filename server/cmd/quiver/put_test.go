package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var putSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String},
}, nil)

func TestPutFormats(t *testing.T) {
	addr := startQuiver(t)
	dir := t.TempDir()
	recs := inputBatches(t, putSchema, 3, 100)
	// Names deliberately lie about the format: detection is by magic bytes.
	files := map[string]string{
		"arrow-file":   writeInput(t, dir, "a.parquet", "arrow-file", putSchema, recs),
		"arrow-stream": writeInput(t, dir, "b.arrow", "arrow-stream", putSchema, recs),
		"parquet":      writeInput(t, dir, "c.arrows", "parquet", putSchema, recs),
	}
	tests := []struct {
		name  string
		files []string
		rows  int
	}{
		{"ipc file", []string{files["arrow-file"]}, 300},
		{"ipc stream", []string{files["arrow-stream"]}, 300},
		{"parquet", []string{files["parquet"]}, 300},
		{"all three in one stream", []string{files["arrow-file"], files["arrow-stream"], files["parquet"]}, 900},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(append([]string{"put", "--addr", addr, "--endpoint", "devnull"}, tt.files...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var ack struct {
				Committed bool
				Rows      int
			}
			if err := json.Unmarshal([]byte(stdout), &ack); err != nil || !ack.Committed || ack.Rows != tt.rows {
				t.Errorf("stdout %q: want a committed ack of %d rows (%v)", stdout, tt.rows, err)
			}
		})
	}
}

func TestPutSchemaMismatch(t *testing.T) {
	addr := startQuiver(t)
	dir := t.TempDir()
	first := writeInput(t, dir, "first.arrow", "arrow-file", putSchema, inputBatches(t, putSchema, 1, 5))
	other := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "label", Type: arrow.BinaryTypes.String},
	}, nil)
	second := writeInput(t, dir, "second.parquet", "parquet", other, inputBatches(t, other, 1, 5))
	code, stdout, stderr := runCmd("put", "--addr", addr, "--endpoint", "devnull", first, second)
	if code != 1 || stdout != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
	}
	for _, want := range []string{second, "differs from " + first, `"label"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
}

func TestPutTransactional(t *testing.T) {
	addr := startQuiver(t)
	file := writeInput(t, t.TempDir(), "in", "arrow-stream", putSchema, inputBatches(t, putSchema, 2, 10))
	code, stdout, stderr := runCmd("put", "--addr", addr, "--endpoint", "devnull", "--writer", "job-1", "--epoch", "7", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := `{"staged":true,"rows":20,"writer":"job-1","epoch":7}` + "\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	if want := `next: quiver action precommit '{"writer":"job-1","epoch":7}'`; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q lacks the hint %q", stderr, want)
	}
	// The hint works.
	code, stdout, stderr = runCmd("action", "--addr", addr, "precommit", `{"writer":"job-1","epoch":7}`)
	if code != 0 || !strings.Contains(stdout, `"state": "precommitted"`) {
		t.Errorf("precommit: exit %d, stdout %s, stderr %s", code, stdout, stderr)
	}
}

func TestPutBadInvocations(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage")
	writeFile(t, garbage, "this is not arrow")
	tests := []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no endpoint", []string{"put", "x"}, 2, "--endpoint is required"},
		{"no files", []string{"put", "--endpoint", "e"}, 2, "at least one FILE"},
		{"writer without epoch", []string{"put", "--endpoint", "e", "--writer", "w", "x"}, 2, "go together"},
		{"missing file", []string{"put", "--endpoint", "e", "/does/not/exist"}, 1, "no such file"},
		{"not arrow nor parquet", []string{"put", "--endpoint", "e", garbage}, 1, "not an Arrow IPC file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCmd(tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.says) {
				t.Errorf("exit %d, stderr %q; want %d mentioning %q", code, stderr, tt.code, tt.says)
			}
		})
	}
}

func TestInputsRebindMetadataOnlyDifferences(t *testing.T) {
	dir := t.TempDir()
	withMeta := arrow.NewSchema(putSchema.Fields(), func() *arrow.Metadata { m := arrow.NewMetadata([]string{"k"}, []string{"v"}); return &m }())
	a := writeInput(t, dir, "a", "arrow-file", putSchema, inputBatches(t, putSchema, 1, 3))
	b := writeInput(t, dir, "b", "arrow-stream", withMeta, inputBatches(t, withMeta, 2, 4))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ins, err := openInputs(t.Context(), []string{a, b}, mem, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ins.close()
	if got := ins.rows(); got != -1 {
		t.Errorf("rows() = %d, want -1 (a stream's rows are unknown)", got)
	}
	var rows int64
	for ins.Next() {
		if !ins.RecordBatch().Schema().Equal(putSchema) {
			t.Errorf("batch schema %v, want the first file's", ins.RecordBatch().Schema())
		}
		rows += ins.RecordBatch().NumRows()
	}
	if ins.Err() != nil || rows != 11 {
		t.Errorf("read %d rows, err %v; want 11", rows, ins.Err())
	}
}
