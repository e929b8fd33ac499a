package e2e

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/emulator"
	"github.com/quiver-ingest/quiver/internal/reftool"
)

// TestScaleOutOnS3: three quiver processes (data_dirs of their own, one
// descriptor key) serve a Delta table and a Lance dataset in one bucket
// of the S3 emulator (moto), with the store's conditional writes as the
// only arbiter between them:
//
//   - 12 concurrent auto-commit streams spread over the servers race
//     their commits;
//   - a parallel job precommits its share of epoch 1 on every server and
//     commits once, on the first server, with the others' descriptors
//     handed over; committing the others' shares afterwards replays;
//   - epoch 2 again, with the committing server killed (SIGKILL) between
//     its commit decision and the publish; restarted, it finishes the
//     commit, and the job's retry of the commit replays.
//
// Every row is in the table and the dataset exactly once, and the Delta
// log's versions are contiguous: one per auto-commit stream and one per
// epoch. So say Quiver's own readers, and so say the reference
// implementations reading the bucket: delta-rs, pylance and LanceDB.
func TestScaleOutOnS3(t *testing.T) {
	const (
		servers = 3
		streams = 12 // auto-commit, half to each endpoint
		rows    = 300
	)
	store := emulator.S3(t)
	bucket := store.Bucket(t)
	tableURI, datasetURI := store.URI(bucket, "events"), store.URI(bucket, "items.lance")
	keyFile := filepath.Join(t.TempDir(), "descriptor.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{9}, 32))), 0o600); err != nil {
		t.Fatal(err)
	}
	extra := "txn: {descriptor_key_file: " + keyFile + "}\n"
	cfgs := make([]string, servers)
	procs := make([]*proc, servers)
	clients := make([]*quiver.Client, servers)
	for i := range servers {
		cfgs[i] = writeConfigWith(t, t.TempDir(), extra, deltaAppend(tableURI), lanceAppend(datasetURI))
		procs[i] = startQuiver(t, cfgs[i], store.Env()...)
		clients[i] = dial(t, procs[i])
	}
	ctx := ctxT(t)
	next := map[string]int64{} // the next id of each endpoint
	take := func(endpoint string, n int64) int64 {
		start := next[endpoint]
		next[endpoint] += n
		return start
	}

	var g errgroup.Group
	for i := range streams {
		endpoint := []string{deltaEndpoint, lanceEndpoint}[i%2]
		r := idRows(t, take(endpoint, rows), rows)
		c := clients[i%servers]
		g.Go(func() error {
			ack, err := c.Put(ctx, endpoint, r)
			if err == nil && (!ack.Committed || ack.Rows != rows) {
				err = fmt.Errorf("auto-commit put to %s: ack %+v", endpoint, ack)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	// precommitShares stages and precommits every server's share of the
	// job's epoch and returns the descriptors of servers 1.. by endpoint.
	precommitShares := func(epoch int64) map[string][][]byte {
		handed := map[string][][]byte{}
		for i, c := range clients {
			tx := c.Txn("job", epoch)
			for _, endpoint := range []string{deltaEndpoint, lanceEndpoint} {
				if _, err := tx.Put(ctx, endpoint, idRows(t, take(endpoint, rows), rows)); err != nil {
					t.Fatalf("server %d: put to %s in epoch %d: %v", i, endpoint, epoch, err)
				}
			}
			st, err := tx.Precommit(ctx)
			if err != nil {
				t.Fatalf("server %d: precommit of epoch %d: %v", i, epoch, err)
			}
			for _, p := range st.Participants {
				if i > 0 {
					handed[p.Endpoint] = append(handed[p.Endpoint], p.Descriptor)
				}
			}
		}
		return handed
	}
	// commitOthers commits the other servers' shares, already published by
	// the first server's commit: each must replay.
	commitOthers := func(epoch int64) {
		for i, c := range clients[1:] {
			st, err := c.Txn("job", epoch).Commit(ctx, nil)
			if err != nil || st.State != quiver.StateCommitted || !st.Replayed {
				t.Fatalf("server %d: commit of its share of epoch %d after the first server published it: %+v, %v; want committed and replayed", i+1, epoch, st, err)
			}
		}
	}

	handed := precommitShares(1)
	if st, err := clients[0].Txn("job", 1).Commit(ctx, handed); err != nil || st.State != quiver.StateCommitted || st.Replayed {
		t.Fatalf("commit of epoch 1 with the descriptors of servers 1 and 2: %+v, %v", st, err)
	}
	commitOthers(1)

	// Epoch 2, the first server dying between decision and publish.
	procs[0].kill()
	procs[0] = startQuiver(t, cfgs[0], append(store.Env(), "QUIVER_TEST_CRASH=after-commit-decision")...)
	clients[0] = dial(t, procs[0])
	handed = precommitShares(2)
	if _, err := clients[0].Txn("job", 2).Commit(ctx, handed); err == nil {
		t.Fatal("commit of epoch 2 answered, but the crash point should have killed the server first")
	}
	procs[0].waitExit(t)
	procs[0] = startQuiver(t, cfgs[0], store.Env()...)
	clients[0] = dial(t, procs[0])
	if st, err := clients[0].Txn("job", 2).Commit(ctx, handed); err != nil || st.State != quiver.StateCommitted {
		t.Fatalf("the job's retry of the commit of epoch 2 after the restart: %+v, %v", st, err)
	}
	commitOthers(2)
	for _, endpoint := range []string{deltaEndpoint, lanceEndpoint} {
		wantCommittedEpoch(t, clients[1], endpoint, "job", 2)
	}

	tab := readDelta(t, tableURI)
	tab.wantIDs(t, next[deltaEndpoint])
	// One version per auto-commit stream and per epoch, from 0.
	if want := int64(streams/2 + 2 - 1); tab.version != want {
		t.Fatalf("table at version %d, want %d", tab.version, want)
	}
	wantContiguousLog(t, tableURI, tab.version)
	lanceVersion := readLance(t, datasetURI)
	lanceVersion.wantIDs(t, next[lanceEndpoint])

	// The reference implementations read the same from the bucket.
	ref := readBackOnS3(t, store, "s3://"+bucket+"/events", "s3://"+bucket+"/items.lance")
	for _, reader := range []string{"delta-rs", "pylance", "lancedb"} {
		got, want := ref[reader], struct{ rows, version int64 }{next[lanceEndpoint], int64(lanceVersion.version)}
		if reader == "delta-rs" {
			want.rows, want.version = next[deltaEndpoint], tab.version
			if !slices.Equal(got.History, idRange(tab.version+1)) {
				t.Errorf("delta-rs: history versions %v, want 0..%d", got.History, tab.version)
			}
		}
		wantIDRange(t, reader, got.IDs, want.rows)
		if got.Version != want.version {
			t.Errorf("%s reads version %d, want %d", reader, got.Version, want.version)
		}
	}
}

// referenceRead is what testdata/readback.py reports of one reader.
type referenceRead struct {
	Version int64   `json:"version"`
	History []int64 `json:"history"` // delta-rs only
	IDs     []int64 `json:"ids"`     // sorted
}

// readBackOnS3 reads the Delta table and the Lance dataset at the plain
// s3:// URIs given from the S3 emulator with delta-rs, pylance and
// LanceDB (testdata/readback.py, in the project's .venv, where moto runs
// from too), by reader.
func readBackOnS3(t *testing.T, store *emulator.Store, table, dataset string) map[string]referenceRead {
	t.Helper()
	python := filepath.Join("..", "..", ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		reftool.Missing(t, "delta-rs, pylance and LanceDB (in the project .venv: make venv)", err)
	}
	cmd := exec.Command(python, filepath.Join("testdata", "readback.py"), store.Endpoint, table, dataset)
	cmd.Env = append(os.Environ(), store.Env()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("readback.py (a stale .venv? make venv): %v\n%s", err, stderr.String())
	}
	var reads map[string]referenceRead
	if err := json.Unmarshal(out, &reads); err != nil {
		t.Fatalf("readback.py answered %q: %v", out, err)
	}
	return reads
}

// idRange returns 0, 1, ..., n-1.
func idRange(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// TestMissingBucketOnS3: an endpoint whose bucket does not exist is
// unavailable with a reason that says so, in the health action and to a
// client, and the server keeps serving (/readyz: ready).
func TestMissingBucketOnS3(t *testing.T) {
	store := emulator.S3(t)
	p := startQuiver(t, writeConfig(t, t.TempDir(), deltaAppend(store.URI("no-such-bucket", "events")), devnullEndpoint), store.Env()...)
	if code, body := p.readyz(t); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz = %d %q; want 200 ready (the other endpoint serves)", code, body)
	}
	c := dial(t, p)
	if h, err := c.Health(ctxT(t)); err != nil || !strings.Contains(h.Endpoints[deltaEndpoint], "bucket does not exist") {
		t.Fatalf("health: %+v, %v; want the endpoint's reason naming the missing bucket", h, err)
	}
	_, err := c.Put(ctxT(t), deltaEndpoint, idRows(t, 0, 10))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "bucket does not exist") {
		t.Fatalf("put to the endpoint without a bucket: %v; want FailedPrecondition naming the missing bucket", err)
	}
}
