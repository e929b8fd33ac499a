package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/server/config"
	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers/storage"
)

func dialClient(t *testing.T, s *testServer) *quiver.Client {
	t.Helper()
	c, err := quiver.Dial(s.FlightAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// precommitOn stages rows for job@1 on devnull of c and precommits it,
// returning the (sealed) descriptor.
func precommitOn(t *testing.T, c *quiver.Client, rows int) []byte {
	t.Helper()
	tx := c.Txn("job", 1)
	if _, err := tx.Put(t.Context(), "devnull", idReader(t, rows)); err != nil {
		t.Fatal(err)
	}
	st, err := tx.Precommit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.Participants[0].Descriptor
}

// Without txn.descriptor_key_file the key is generated into data_dir on
// the first start, private, and reused by restarts: a descriptor sealed
// before a restart verifies after it.
func TestDescriptorKeyGeneratedAndReused(t *testing.T) {
	dir := t.TempDir()
	s := startServerIn(t, dir, twoEndpoints)
	path := filepath.Join(dir, "data", "descriptor.key")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated key %v, %v: want mode 0600", fi, err)
	}
	before := precommitOn(t, dialClient(t, s), 5)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	s = startServerIn(t, dir, twoEndpoints)
	tx := dialClient(t, s).Txn("job", 1)
	st, err := tx.Status(t.Context())
	if err != nil || !bytes.Equal(st.Participants[0].Descriptor, before) {
		t.Fatalf("after a restart: %+v %v, want the same sealed descriptor", st, err)
	}
	if st, err := tx.Commit(t.Context(), map[string][][]byte{"devnull": {before}}); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("commit with its own descriptor handed back: %+v %v", st, err)
	}
	if got := s.committedRows(t, "devnull"); got != 5 {
		t.Fatalf("committed %d rows, want 5", got)
	}
}

// Servers sharing txn.descriptor_key_file accept each other's descriptors;
// a server with another key is refused.
func TestServersSharingTheKeyFile(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "descriptor.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{7}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := twoEndpoints + "txn: {descriptor_key_file: " + keyFile + "}\n"
	first, second, other := startServer(t, shared), startServer(t, shared), startServer(t, twoEndpoints)
	fromSecond := precommitOn(t, dialClient(t, second), 7)
	fromOther := precommitOn(t, dialClient(t, other), 2)
	precommitOn(t, dialClient(t, first), 5)

	tx := dialClient(t, first).Txn("job", 1)
	_, err := tx.Commit(t.Context(), map[string][][]byte{"devnull": {fromOther}})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `descriptors["devnull"][0]`) {
		t.Fatalf("descriptor of a server with another key: %v, want PermissionDenied naming it", err)
	}
	if st, err := tx.Commit(t.Context(), map[string][][]byte{"devnull": {fromSecond}}); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("commit with the second server's descriptor: %+v %v", st, err)
	}
	if got := first.committedRows(t, "devnull"); got != 12 {
		t.Fatalf("committed %d rows, want 12 (5 own + 7 handed over)", got)
	}
}

// The config's ranges are the service's and the coordinator's.
func TestConfigLimitsMatchService(t *testing.T) {
	ep := "endpoints: [{name: devnull, sink: discard}]\n"
	for doc, ok := range map[string]bool{
		fmtLimit(flightsvc.MaxMessageBytesLimit) + ep:                                                          true,
		fmtLimit(flightsvc.MaxMessageBytesLimit+1) + ep:                                                        false,
		"txn: {ttl: " + txn.MaxTTL.String() + ", max_ttl: " + txn.MaxTTL.String() + "}\n" + ep:                 true,
		"txn: {ttl: 1m, max_ttl: " + (txn.MaxTTL + time.Second).String() + "}\n" + ep:                          false,
		"txn: {ttl: " + (txn.MaxTTL + time.Second).String() + ", max_ttl: " + txn.MaxTTL.String() + "}\n" + ep: false,
	} {
		_, err := config.Parse([]byte(doc), t.TempDir(), Sinks())
		if (err == nil) != ok {
			t.Errorf("%q: %v, want accepted = %v", doc, err, ok)
		}
	}
}

func fmtLimit(n int64) string {
	return "limits: {max_message_bytes: " + strconv.FormatInt(n, 10) + ", endpoint_buffer_bytes: " + strconv.FormatInt(2*n, 10) + "}\n"
}

// twoServersOneTable starts two servers sharing a descriptor key, each
// with an endpoint "events" on the same Delta table, and returns them and
// the table's folder.
func twoServersOneTable(t *testing.T) (first, second *testServer, table string) {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "descriptor.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{9}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	table = filepath.Join(t.TempDir(), "events")
	cfg := "endpoints:\n  - {name: events, sink: delta, delta: {table_uri: \"file://" + table + "\"}}\n" +
		"txn: {descriptor_key_file: " + keyFile + "}\n"
	return startServer(t, cfg), startServer(t, cfg), table
}

// precommitJob puts rows into (job, 1) on "events" through c, precommits
// it and returns the endpoint's sealed descriptor.
func precommitJob(t *testing.T, c *quiver.Client, rows int) []byte {
	t.Helper()
	tx := c.Txn("job", 1)
	if _, err := tx.Put(t.Context(), "events", idReader(t, rows)); err != nil {
		t.Fatal(err)
	}
	st, err := tx.Precommit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.Participants[0].Descriptor
}

// A descriptor handed over whose files are gone is refused before the
// commit is decided, through the server's endpoint wrapper (the sink's
// writers.DescriptorChecker): the transaction stays precommitted and
// commits without it.
func TestHandedDescriptorCheckedBeforeDecision(t *testing.T) {
	first, second, table := twoServersOneTable(t)
	fromSecond := precommitJob(t, dialClient(t, second), 7)
	files, err := filepath.Glob(filepath.Join(table, "*.parquet"))
	if err != nil || len(files) != 1 {
		t.Fatalf("data files %v, %v: want the second server's one", files, err)
	}
	if err := os.Remove(files[0]); err != nil { // lost, say by a mistaken cleanup
		t.Fatal(err)
	}
	precommitJob(t, dialClient(t, first), 5)
	tx := dialClient(t, first).Txn("job", 1)
	_, err = tx.Commit(t.Context(), map[string][][]byte{"events": {fromSecond}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "nothing was decided") {
		t.Fatalf("commit with a handed descriptor whose files are gone: %v, want InvalidArgument before the decision", err)
	}
	if st, err := tx.Status(t.Context()); err != nil || st.State != quiver.StatePrecommitted {
		t.Fatalf("after the refused commit: %+v %v, want still precommitted", st, err)
	}
	if st, err := tx.Commit(t.Context(), nil); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("commit of its own share: %+v %v", st, err)
	}
	b, err := storage.Open(t.Context(), "file://"+table, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if rows, _ := mustLoad(t, b).NumRecords(); rows != 5 {
		t.Fatalf("table rows %d, want the first server's 5", rows)
	}
}

// dataFiles lists the Parquet files under a Delta table's folder.
func dataFiles(t *testing.T, table string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(table, "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A rolled-back precommit's data files are deleted when the server's
// descriptor key is its own (no other server can commit them), and left
// for vacuum when the key is shared (another server may have published
// them).
func TestRollbackDeletesPrecommittedFilesOfAnOwnKey(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "descriptor.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{5}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, txn string
		kept      bool
	}{{"own key", "", false}, {"shared key", "txn: {descriptor_key_file: " + keyFile + "}\n", true}} {
		t.Run(c.name, func(t *testing.T) {
			table := filepath.Join(t.TempDir(), "events")
			s := startServer(t, "endpoints:\n  - {name: events, sink: delta, delta: {table_uri: \"file://"+table+"\"}}\n"+c.txn)
			client := dialClient(t, s)
			precommitJob(t, client, 7)
			if len(dataFiles(t, table)) == 0 {
				t.Fatal("the precommit wrote no data file")
			}
			if _, err := client.Txn("job", 1).Rollback(t.Context()); err != nil {
				t.Fatal(err)
			}
			if left := dataFiles(t, table); (len(left) > 0) != c.kept {
				t.Fatalf("data files after the rollback: %v, want kept = %v", left, c.kept)
			}
		})
	}
}
