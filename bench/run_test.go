package bench

import (
	"context"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/clients/go/quiverflag"
)

// startBaselineT serves a baseline server for the test.
func startBaselineT(t *testing.T) string {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	addr, stop, err := startBaseline(mem, quiver.DefaultMaxMessageBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
		mem.AssertSize(t, 0)
	})
	return addr
}

// TestRunAgainstServer drives a running server through Conn.Addr (a
// baseline server standing in for Quiver).
func TestRunAgainstServer(t *testing.T) {
	addr := startBaselineT(t)
	cfg := Config{Conn: quiverflag.Conn{Addr: addr}, Endpoint: "x", Load: Load{Streams: []int{2}, Rows: 3000, Runs: 2}, BatchRows: 1000, Seed: 1}
	rep, err := Run(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Server != addr || rep.Workload.Batches != 3 || len(rep.Results) != 1 || len(rep.Ratios) != 0 {
		t.Fatalf("report = %+v", rep)
	}
	if r := rep.Results[0]; r.Target != targetQuiver || r.Rows != 6000 || r.RowsPerSec <= 0 {
		t.Errorf("result = %+v", r)
	}
}

func TestConfigErrors(t *testing.T) {
	good := Config{Endpoint: "x", Load: Load{Streams: []int{1}, Rows: 1, Runs: 1}, BatchRows: 1}
	for name, mutate := range map[string]func(*Config){
		"no streams":   func(c *Config) { c.Streams = nil },
		"zero streams": func(c *Config) { c.Streams = []int{0} },
		"zero rows":    func(c *Config) { c.Rows = 0 },
		"zero runs":    func(c *Config) { c.Runs = 0 },
		"zero batch":   func(c *Config) { c.BatchRows = 0 },
		"no endpoint":  func(c *Config) { c.Endpoint = "" },
	} {
		c := good
		mutate(&c)
		if _, err := Run(context.Background(), c, io.Discard); err == nil {
			t.Errorf("%s: Run accepted %+v", name, c)
		}
	}
	if err := good.validate(); err != nil {
		t.Errorf("good config refused: %v", err)
	}
}
