package flightsvc_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

// The steps of #33 item 4: the admin begins w@3; token low (granted only
// devnull) could see it, status it, roll it back and join it with a put
// to devnull, and the admin's commit then published low's rows. Now low
// gets NotFound for all of it, the admin's transaction stays whole, and
// low's own transactions are its own.
func TestTransactionsBelongToTheirOwner(t *testing.T) {
	s := startServer(t, serverConfig{
		endpoints: map[string]writers.Writer{"events": discard.New(nil), "devnull": discard.New(nil)},
		tokens:    tenantTokens,
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	admin, low := bearer(ctx, adminSecret), bearer(ctx, lowSecret)
	if _, err := s.action(admin, "begin", `{"writer":"w","epoch":3}`); err != nil {
		t.Fatal(err)
	}

	_, err := s.action(low, "status", `{"writer":"w","epoch":3}`)
	wantCode(t, err, codes.NotFound, "w@3")
	_, err = s.action(low, "rollback", `{"writer":"w","epoch":3}`)
	wantCode(t, err, codes.NotFound, "w@3")
	_, err = s.put(low, txnDesc("devnull", "w", 3), 4)
	wantCode(t, err, codes.NotFound, "w@3")
	_, err = s.action(low, "begin", `{"writer":"w","epoch":4}`)
	wantCode(t, err, codes.PermissionDenied, "writer name of your own")

	st, err := s.action(admin, "status", `{"writer":"w","epoch":3}`)
	if err != nil || st["state"] != "open" || len(st["participants"].([]any)) != 0 {
		t.Fatalf("the admin's transaction after low's attempts: %v, %v (want open, no participant)", st, err)
	}

	// low's own transaction: its own to use; the admin sees it too.
	if _, err := s.put(low, txnDesc("devnull", "mine", 1), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.action(low, "status", `{"writer":"mine","epoch":1}`); err != nil {
		t.Fatalf("low's status of its own transaction: %v", err)
	}
	_, err = s.action(bearer(ctx, ownSecret), "status", `{"writer":"mine","epoch":1}`)
	wantCode(t, err, codes.NotFound, "mine@1")
	if st, err := s.action(admin, "rollback", `{"writer":"mine","epoch":1}`); err != nil || st["state"] != "aborted" {
		t.Fatalf("the admin's rollback of low's transaction: %v, %v", st, err)
	}
}

// Committed epochs are recorded per endpoint and writer, whoever committed
// them: token low, sharing endpoint devnull with tenant, could commit a
// huge epoch under tenant's writer name once tenant's transaction had
// ended, and every later epoch of tenant's was a replay, its rows dropped.
// With writer names per token (auth.tokens[].writers) low is refused, and
// tenant's next epoch is written; Flight SQL's server-named transactions
// stay usable.
func TestWriterNamesPerToken(t *testing.T) {
	tokens := slices.Clone(tenantTokens)
	tokens[0].Writers = []string{"low-*"}
	tokens[0].Actions = append(slices.Clone(tokens[0].Actions), "committed-epoch")
	tokens[1].Writers = []string{"tenant-*", "nightly"}
	s := startServer(t, serverConfig{
		endpoints: map[string]writers.Writer{"events": discard.New(testSchema()), "devnull": discard.New(testSchema())},
		tokens:    tokens,
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tenant, low := bearer(ctx, ownSecret), bearer(ctx, lowSecret)
	commit := func(who context.Context, writer string, epoch int64) (map[string]any, error) {
		if _, err := s.put(who, txnDesc("devnull", writer, epoch), 2); err != nil {
			return nil, err
		}
		body := fmt.Sprintf(`{"writer":%q,"epoch":%d}`, writer, epoch)
		if _, err := s.action(who, "precommit", body); err != nil {
			return nil, err
		}
		return s.action(who, "commit", body)
	}
	if _, err := commit(tenant, "tenant-w", 1); err != nil {
		t.Fatal(err)
	}
	_, err := s.action(low, "begin", `{"writer":"tenant-w","epoch":4611686018427387904}`)
	wantCode(t, err, codes.PermissionDenied, "auth.tokens[].writers")
	_, err = s.put(low, txnDesc("devnull", "tenant-w", 4611686018427387904), 1)
	wantCode(t, err, codes.PermissionDenied, "auth.tokens[].writers")
	_, err = s.action(low, "committed-epoch", `{"endpoint":"devnull","writer":"tenant-w"}`)
	wantCode(t, err, codes.PermissionDenied, "auth.tokens[].writers")
	// Flight SQL's prefix is no way out: only transactions the server named are exempt.
	_, err = s.put(low, txnDesc("devnull", "flightsql-nightly", 1), 1)
	wantCode(t, err, codes.PermissionDenied, "auth.tokens[].writers")
	if st, err := commit(tenant, "tenant-w", 2); err != nil || st["replayed"] == true {
		t.Fatalf("tenant's epoch 2 after low's attempts: %v, %v (want committed, not a replay)", st, err)
	}
	if _, err := commit(low, "low-job", 1); err != nil {
		t.Fatalf("low's own writer name: %v", err)
	}
	if _, err := commit(tenant, "nightly", 1); err != nil {
		t.Fatalf("tenant's exact writer name: %v", err)
	}
	tx, err := s.sqlClient().BeginTransaction(low)
	if err != nil {
		t.Fatalf("a Flight SQL transaction of a token with writer names: %v", err)
	}
	opts := ingestOpts("devnull")
	opts.TransactionId = tx.ID()
	if _, err := s.ingest(low, opts, 2); err != nil {
		t.Fatalf("an ingest in it: %v", err)
	}
	if err := tx.Commit(low); err != nil {
		t.Fatalf("its commit: %v", err)
	}
}
