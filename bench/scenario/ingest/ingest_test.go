package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quiver-ingest/quiver/bench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestInProcessJSON runs the scenario without --addr: Quiver in process
// (the server assembly), its discard endpoint named by --endpoint, with
// the baseline, and checks the JSON report.
func TestInProcessJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark run: skipped with -short")
	}
	var out bytes.Buffer
	args := []string{"--endpoint", "sink", "--baseline", "--streams", "1,3", "--rows", "5000", "--batch-rows", "1024", "--runs", "2", "--json"}
	if err := bench.Main(context.Background(), args, &out, io.Discard, Scenario()); err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	if rep.Server != "in-process" || rep.Workload.Batches != 5 || rep.Workload.RowsPerStream != 5000 || rep.Runs != 2 {
		t.Errorf("report header = %+v", rep)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Target)
		if r.Rows != 5000*int64(r.Streams) || r.RowsPerSec <= 0 || r.MBPerSec <= 0 || r.AckP99 < r.AckP50 || r.AckP50 <= 0 || r.CommitMax < r.CommitP50 {
			t.Errorf("implausible result %+v", r)
		}
	}
	if strings.Join(got, ",") != "quiver,baseline,quiver,baseline" {
		t.Errorf("targets = %v, want quiver and baseline for each stream count", got)
	}
	if len(rep.Ratios) != 2 || rep.Ratios[0].Streams != 1 || rep.Ratios[1].Streams != 3 || rep.Ratios[0].Ratio <= 0 {
		t.Errorf("ratios = %+v", rep.Ratios)
	}
}

func TestTable(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark run: skipped with -short")
	}
	var out bytes.Buffer
	args := []string{"--streams", "2", "--rows", "3000", "--batch-rows", "1000", "--runs", "1"}
	if err := bench.Main(context.Background(), args, &out, io.Discard, Scenario()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3000 rows per stream in 1000-row batches", "server in-process", "rows/s", "ack p99", "quiver        2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"streams not numbers", []string{"--streams", "1,x"}, "comma list"},
		{"zero streams", []string{"--addr", "x:1", "--streams", "0"}, "must be positive"},
		{"zero rows", []string{"--addr", "x:1", "--rows", "0"}, "--rows 0"},
		{"stray argument", []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := bench.Main(context.Background(), tt.args, io.Discard, io.Discard, Scenario())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Main(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}
