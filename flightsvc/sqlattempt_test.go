package flightsvc_test

import "testing"

// TestSQLTransactionIngestsFromTwoConnections: a Flight SQL transaction
// names its id in every ingest (transaction_id), so any connection of the
// client may ingest into it (a driver's connection pool, a reconnect).
// Its begin (sqltxn.go) records no connection, and an ingest carries no
// attempt, so an ingest from another connection than the first ingest's
// fences the transaction's attempt, discarding the rows already
// ingested and acknowledged; the commit then publishes only the last
// connection's rows.
func TestSQLTransactionIngestsFromTwoConnections(t *testing.T) {
	s := startServer(t, serverConfig{})
	ctx := t.Context()
	tx, opts := s.beginSQL(ctx)
	if n, err := s.ingest(ctx, opts, 4); err != nil || n != 4 {
		t.Fatalf("first ingest: %d, %v", n, err)
	}
	if n, err := s.reconnected().ingest(ctx, opts, 6); err != nil || n != 6 {
		t.Fatalf("second ingest, another connection: %d, %v", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.sinks["events"].Committed().Rows; got != 10 {
		t.Fatalf("committed %d rows of a transaction whose ingests of 4 and 6 rows were acknowledged, want 10", got)
	}
}
