package flightsvc_test

import "testing"

// TestPutFromAnotherConnectionKeepsAcknowledgedRows: a client that names
// no attempt (any pre-attempt client, or a plain pyarrow.flight DoPut)
// puts 5 rows, acknowledged as staged; its gRPC channel then reconnects
// (a network blip, an idle timeout, a second worker of the same job) and
// it puts 3 more rows into the same transaction, then precommits and
// commits. Every call succeeds, yet the second put silently fenced the
// first attempt: the commit publishes 3 rows, not 8. An acknowledged put
// must not be dropped without any error reaching the client.
func TestPutFromAnotherConnectionKeepsAcknowledgedRows(t *testing.T) {
	s := startServer(t, serverConfig{})
	if _, err := s.put(t.Context(), txnDesc("events", "q", 7), 5); err != nil {
		t.Fatal(err)
	}
	again := s.reconnected()
	if _, err := again.put(t.Context(), txnDesc("events", "q", 7), 3); err != nil {
		t.Logf("second put refused (acceptable): %v", err)
		return
	}
	again.mustAction("precommit", `{"writer":"q","epoch":7}`)
	again.mustAction("commit", `{"writer":"q","epoch":7}`)
	if got := s.sinks["events"].Committed().Rows; got != 8 {
		t.Fatalf("committed %d rows with every put, precommit and commit acknowledged, want 8 (or an error somewhere)", got)
	}
}
