package flightsvc_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

// fakeMaintenance records the requests it is given.
type fakeMaintenance struct {
	mu        sync.Mutex
	targets   []*int64
	vacuums   []*time.Duration
	dryRuns   []bool
	optimized writers.OptimizeResult
	ops       writers.MaintenanceOps
}

func (f *fakeMaintenance) Ops() writers.MaintenanceOps { return f.ops }

func (f *fakeMaintenance) Optimize(_ context.Context, target *int64) (writers.OptimizeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets = append(f.targets, target)
	return f.optimized, nil
}

func (f *fakeMaintenance) Vacuum(_ context.Context, retention *time.Duration, dryRun bool) (writers.VacuumResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vacuums = append(f.vacuums, retention)
	f.dryRuns = append(f.dryRuns, dryRun)
	return writers.VacuumResult{FilesDeleted: 3, BytesDeleted: 300, DryRun: dryRun}, nil
}

// TestMaintenanceActions: optimize and vacuum reach the endpoint's
// maintenance with the body's values (nil when left out) and answer its
// result with the endpoint; hostile bodies and endpoints without
// maintenance are InvalidArgument before it is called; grants apply per
// action and per endpoint; endpoints lists which operations each
// endpoint supports.
func TestMaintenanceActions(t *testing.T) {
	fake := &fakeMaintenance{optimized: writers.OptimizeResult{Version: 7, FilesRemoved: 10, FilesAdded: 1, BytesRemoved: 1000, BytesAdded: 900, Rows: 42},
		ops: writers.MaintenanceOps{Optimize: true, Vacuum: true}}
	s := startServer(t, serverConfig{
		endpoints:   map[string]writers.Writer{"table": discard.New(nil), "events": discard.New(nil), "vac": discard.New(nil)},
		maintenance: map[string]flightsvc.Maintenance{"table": fake, "vac": &fakeMaintenance{ops: writers.MaintenanceOps{Vacuum: true}}},
		tokens: []flightsvc.Token{
			{Name: "ops", Secret: "ops-secret", Endpoints: []string{"table"}, Actions: []string{"optimize", "endpoints"}},
			{Name: "admin", Secret: adminSecret, Endpoints: []string{"*"}, Actions: []string{"*"}},
		},
	})
	admin := bearer(context.Background(), adminSecret)
	ops := bearer(context.Background(), "ops-secret")

	got, err := s.action(admin, "optimize", `{"endpoint":"table"}`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"endpoint": "table", "version": 7.0, "files_removed": 10.0, "files_added": 1.0, "bytes_removed": 1000.0, "bytes_added": 900.0, "rows": 42.0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("optimize result %s = %v, want %v (%v)", k, got[k], v, got)
		}
	}
	if _, err := s.action(ops, "optimize", `{"endpoint":"table","target_file_bytes":1048576}`); err != nil {
		t.Fatal(err)
	}
	got, err = s.action(admin, "vacuum", `{"endpoint":"table","retention_hours":1.5,"dry_run":true}`)
	if err != nil {
		t.Fatal(err)
	}
	if got["endpoint"] != "table" || got["files_deleted"] != 3.0 || got["dry_run"] != true {
		t.Errorf("vacuum result %v", got)
	}
	if _, err := s.action(admin, "vacuum", `{"endpoint":"table"}`); err != nil {
		t.Fatal(err)
	}
	if len(fake.targets) != 2 || fake.targets[0] != nil || *fake.targets[1] != 1<<20 {
		t.Errorf("optimize targets %v: want nil then 1 MiB", fake.targets)
	}
	if len(fake.vacuums) != 2 || *fake.vacuums[0] != 90*time.Minute || !fake.dryRuns[0] || fake.vacuums[1] != nil || fake.dryRuns[1] {
		t.Errorf("vacuum requests %v %v: want 1.5h dry, then the default for real", fake.vacuums, fake.dryRuns)
	}

	bad := []struct {
		ctx       context.Context
		typ, body string
		code      codes.Code
		fragment  string
	}{
		{admin, "optimize", `{}`, codes.InvalidArgument, `missing field "endpoint"`},
		{admin, "optimize", `{"endpoint":"table","target_file_bytes":0}`, codes.InvalidArgument, "must be from 1"},
		{admin, "optimize", `{"endpoint":"table","target_file_bytes":17179869185}`, codes.InvalidArgument, "must be from 1"},
		{admin, "optimize", `{"endpoint":"table","target_file_bytes":"big"}`, codes.InvalidArgument, `"target_file_bytes"`},
		{admin, "optimize", `{"endpoint":"table","zorder":["x"]}`, codes.InvalidArgument, `unknown field "zorder"`},
		{admin, "optimize", `{"endpoint":"events"}`, codes.InvalidArgument, "no table maintenance"},
		{admin, "optimize", `{"endpoint":"nope"}`, codes.NotFound, "unknown endpoint"},
		{admin, "vacuum", `{"endpoint":"table","retention_hours":-1}`, codes.InvalidArgument, "retention_hours"},
		{admin, "vacuum", `{"endpoint":"table","retention_hours":1e300}`, codes.InvalidArgument, "retention_hours"},
		{admin, "vacuum", `{"endpoint":"table","dry_run":"yes"}`, codes.InvalidArgument, `"dry_run"`},
		{admin, "vacuum", `[1]`, codes.InvalidArgument, "JSON object"},
		{ops, "vacuum", `{"endpoint":"table"}`, codes.PermissionDenied, "vacuum"},
		{ops, "optimize", `{"endpoint":"events"}`, codes.PermissionDenied, "events"},
	}
	for _, c := range bad {
		_, err := s.action(c.ctx, c.typ, c.body)
		if status.Code(err) != c.code || !strings.Contains(err.Error(), c.fragment) {
			t.Errorf("%s %s: %v, want %s mentioning %q", c.typ, c.body, err, c.code, c.fragment)
		}
	}
	if len(fake.targets) != 2 || len(fake.vacuums) != 2 {
		t.Errorf("refused calls reached the maintenance: %d optimize, %d vacuum", len(fake.targets), len(fake.vacuums))
	}

	raw, err := s.actionRaw(admin, "endpoints", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"name":"events","sink":"discard","mode":""}`,
		`{"name":"table","sink":"discard","mode":"","maintenance":["optimize","vacuum"]}`,
		`{"name":"vac","sink":"discard","mode":"","maintenance":["vacuum"]}`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("endpoints = %s: want %s (the maintenance each supports)", raw, want)
		}
	}
}
