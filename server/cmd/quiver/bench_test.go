package main

import (
	"encoding/json"
	"testing"
)

// TestBenchAgainstServer runs `quiver bench` against a real server through
// --addr, as an operator would.
func TestBenchAgainstServer(t *testing.T) {
	addr := startQuiver(t)
	code, stdout, stderr := runCmd("bench", "--addr", addr, "--streams", "2", "--rows", "2000", "--batch-rows", "500", "--runs", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Server  string
		Results []struct {
			Target string
			Rows   int64
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if rep.Server != addr || len(rep.Results) != 1 || rep.Results[0].Target != "quiver" || rep.Results[0].Rows != 4000 {
		t.Errorf("report = %+v", rep)
	}
}
