package server

import (
	"fmt"
	"github.com/quiver-ingest/quiver/internal/reftool"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/testpoll"
	"github.com/quiver-ingest/quiver/server/endpoint"
)

// TestDegradedDeltaEndpoint: a Delta endpoint whose _delta_log holds a
// corrupt commit does not stop the server. The other endpoint serves; the
// broken one answers FailedPrecondition with the reason, and health,
// /readyz, quiver_endpoint_up and the log say so. Once the file is fixed
// the endpoint opens by itself and serves, without a restart.
func TestDegradedDeltaEndpoint(t *testing.T) {
	dir := t.TempDir()
	commit := corruptDeltaTable(t, dir, "broken")
	s := startServerWith(t, dir, `endpoints:
  - {name: devnull, sink: discard}
  - name: broken
    sink: delta
    delta: {table_uri: "file://tables/broken"}
`, Options{EndpointRetryMin: 10 * time.Millisecond, EndpointRetryMax: 50 * time.Millisecond})
	c, err := quiver.Dial(s.FlightAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()

	if ack, err := c.Put(ctx, "devnull", idReader(t, 3)); err != nil || ack.Rows != 3 {
		t.Fatalf("put to the healthy endpoint: %+v, %v", ack, err)
	}
	_, err = c.Put(ctx, "broken", idReader(t, 3))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `endpoint "broken" is unavailable`) || !strings.Contains(err.Error(), "corrupt delta log") {
		t.Fatalf("put to the broken endpoint: %v, want FailedPrecondition naming the corrupt log", err)
	}
	if _, _, err := c.CommittedEpoch(ctx, "broken", "w"); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("committed-epoch of the broken endpoint: %v", err)
	}
	if _, err := c.Txn("w", 1).Put(ctx, "broken", idReader(t, 1)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("transactional put to the broken endpoint: %v", err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "degraded" || h.Endpoints["devnull"] != "ok" || !strings.Contains(h.Endpoints["broken"], "corrupt delta log") || h.Journal != "ok" {
		t.Fatalf("health: %+v, %v", h, err)
	}
	code, body := httpGet(t, "http://"+s.HTTPAddr()+"/readyz")
	if code != 200 || body != "ready\n" {
		t.Fatalf("/readyz = %d %q, want 200 ready (reasons only with a token: TestReadyz)", code, body)
	}
	if up := metricValue(t, s.reg, "quiver_endpoint_up", map[string]string{"endpoint": "broken"}); up != 0 {
		t.Fatalf("quiver_endpoint_up{broken} = %v, want 0", up)
	}
	if up := metricValue(t, s.reg, "quiver_endpoint_up", map[string]string{"endpoint": "devnull"}); up != 1 {
		t.Fatalf("quiver_endpoint_up{devnull} = %v, want 1", up)
	}

	// Fix the table: without the corrupt commit there is no table yet.
	if err := os.Remove(commit); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, "the broken endpoint to open", func() bool {
		return metricValue(t, s.reg, "quiver_endpoint_up", map[string]string{"endpoint": "broken"}) == 1
	})
	if ack, err := c.Put(ctx, "broken", idReader(t, 3)); err != nil || ack.Rows != 3 {
		t.Fatalf("put after recovery: %+v, %v", ack, err)
	}
	if h, err := c.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("health after recovery: %+v, %v", h, err)
	}
	logs := s.logs.String()
	// Retried many times with the same reason: one warning.
	if n := strings.Count(logs, "the sink could not be opened"); n != 1 || !strings.Contains(logs, "level=WARN") {
		t.Errorf("%d warnings for one unchanged reason, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs, "level=INFO msg=\"endpoint: the sink opened: serving\" endpoint=broken") {
		t.Errorf("no recovery line:\n%s", logs)
	}
}

// idReader is one batch of n int64 ids.
func idReader(t *testing.T, n int) array.RecordReader {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range n {
		b.Append(int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(n))
	defer rec.Release()
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdr.Release)
	return rdr
}

// corruptDeltaTable makes dir/tables/name a Delta table whose first commit
// is not JSON (the sink cannot open it: the endpoint is degraded) and
// returns that commit's path.
func corruptDeltaTable(t *testing.T, dir, name string) string {
	t.Helper()
	logDir := filepath.Join(dir, "tables", name, "_delta_log")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	commit := filepath.Join(logDir, "00000000000000000000.json")
	if err := os.WriteFile(commit, []byte("{this is not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return commit
}

// makeReadOnly makes dir refuse new files, returning the function that
// undoes it (also run when the test ends): chmod for a user, the
// immutable attribute for root (whom chmod does not stop). When neither
// takes effect (no chattr, a file system without attributes) chattr is the
// missing reference tool (reftool: skipped locally, failing in CI).
func makeReadOnly(t *testing.T, dir string) (undo func()) {
	t.Helper()
	undo = func() { os.Chmod(dir, 0o755) }
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
			reftool.Missing(t, "chattr (e2fsprogs) on a file system with attributes", fmt.Errorf("chattr +i %s: %v %s", dir, err, out))
		}
		undo = func() { exec.Command("chattr", "-i", dir).Run() }
	} else if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(undo)
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o644); err == nil {
		os.Remove(probe)
		reftool.Missing(t, "chattr (e2fsprogs) on a file system with attributes", fmt.Errorf("%s still takes new files", dir))
	}
	return undo
}

// TestDegradedByFailingWrites: a Delta table directory that turns
// read-only after the endpoint opened fails every write with
// Unavailable while the sink's probe still passes. After
// endpoint.DefaultDegradeAfter failed puts health, /readyz (with a token)
// and quiver_endpoint_degraded say the endpoint is degraded and why;
// clients' invalid batches never count; once the directory takes files
// again the next successful commit recovers it. (Before, health said
// "ok" and /readyz "ready" throughout.)
func TestDegradedByFailingWrites(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("QUIVER_TEST_DEGRADED_TOKEN", "ops")
	s := startServerWith(t, dir, `auth:
  tokens:
    - {name: ops, token_env: QUIVER_TEST_DEGRADED_TOKEN, endpoints: ["*"], actions: ["*"]}
endpoints:
  - {name: devnull, sink: discard}
  - name: lake
    sink: delta
    delta: {table_uri: "file://tables/lake"}
`, Options{})
	c, err := quiver.Dial(s.FlightAddr(), quiver.WithToken("ops"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	if _, err := c.Put(ctx, "lake", idReader(t, 3)); err != nil {
		t.Fatalf("first put: %v", err)
	}
	degraded := func() float64 {
		return metricValue(t, s.reg, "quiver_endpoint_degraded", map[string]string{"endpoint": "lake"})
	}
	wantHealth := func(want string) {
		t.Helper()
		h, err := c.Health(ctx)
		if err != nil || !strings.Contains(h.Endpoints["lake"], want) {
			t.Fatalf("health: %+v, %v; want lake %q", h, err, want)
		}
	}

	makeWritable := makeReadOnly(t, filepath.Join(dir, "tables", "lake"))
	for i := range 2 * endpoint.DefaultDegradeAfter {
		// A client's mistake is not the sink's failure.
		if _, err := c.Put(ctx, "lake", stringIDReader(t)); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("put %d of the wrong type: %v, want InvalidArgument", i, err)
		}
	}
	wantHealth("ok")
	for i := range endpoint.DefaultDegradeAfter {
		if degraded() != 0 {
			t.Fatalf("degraded after %d failed puts", i)
		}
		if _, err := c.Put(ctx, "lake", idReader(t, 3)); status.Code(err) != codes.Unavailable {
			t.Fatalf("put %d into a read-only table: %v, want Unavailable", i, err)
		}
	}
	wantHealth(`endpoint "lake" is degraded: its last 3 sink calls failed`)
	if degraded() != 1 {
		t.Errorf("quiver_endpoint_degraded{lake} = %v, want 1", degraded())
	}
	base := "http://" + s.HTTPAddr() + "/readyz"
	if code, body := httpGetToken(t, base, "ops"); code != 200 || !strings.HasPrefix(body, "degraded: 1 of 2 endpoint(s) failing\n  lake: ") {
		t.Errorf("/readyz with a token = %d %q, want 200 degraded naming lake", code, body)
	}
	if code, body := httpGet(t, base); code != 200 || body != "ready\n" {
		t.Errorf("/readyz without a token = %d %q, want 200 %q", code, body, "ready\n")
	}
	if !strings.Contains(s.logs.String(), `msg="endpoint: degraded`) {
		t.Errorf("no warning logged")
	}

	makeWritable()
	if _, err := c.Put(ctx, "lake", idReader(t, 3)); err != nil {
		t.Fatalf("put once the directory is writable: %v", err)
	}
	wantHealth("ok")
	if degraded() != 0 {
		t.Errorf("quiver_endpoint_degraded{lake} = %v after a commit, want 0", degraded())
	}
}

// stringIDReader is one batch whose id column is a string: a Delta
// table of int64 ids refuses it (InvalidArgument).
func stringIDReader(t *testing.T) array.RecordReader {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Append("one")
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 1)
	defer rec.Release()
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdr.Release)
	return rdr
}
