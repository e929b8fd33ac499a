package e2e

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/internal/emulator"
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
// epoch.
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
	readLance(t, datasetURI).wantIDs(t, next[lanceEndpoint])
}

// TestMissingBucketOnS3: an endpoint whose bucket does not exist is
// unavailable with a reason that says so, on /readyz and to a client, and
// the server keeps serving.
func TestMissingBucketOnS3(t *testing.T) {
	store := emulator.S3(t)
	p := startQuiver(t, writeConfig(t, t.TempDir(), deltaAppend(store.URI("no-such-bucket", "events")), devnullEndpoint), store.Env()...)
	code, body := p.readyz(t)
	if code != http.StatusOK || !strings.Contains(body, "bucket does not exist") {
		t.Fatalf("/readyz = %d %q; want 200, degraded, naming the missing bucket", code, body)
	}
	_, err := dial(t, p).Put(ctxT(t), deltaEndpoint, idRows(t, 0, 10))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "bucket does not exist") {
		t.Fatalf("put to the endpoint without a bucket: %v; want FailedPrecondition naming the missing bucket", err)
	}
}
