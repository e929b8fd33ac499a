package flightsvc_test

import (
	"context"
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
