// Package txn is the transaction coordinator: the state machine of
// (writer, epoch) transactions, its durable journal, recovery after a
// restart and expiry of abandoned transactions.
//
// A transaction moves open → precommitted → committed | aborted. Every
// transition is journaled (package txn/journal, format in
// docs/journal-format.md) and fsync'd before it is acknowledged; a commit
// is decided in the journal before any sink commits, so a crash after the
// decision is finished on the next Open. Sinks are the source of truth for
// what committed: the coordinator asks them (writers.Writer.CommittedEpoch)
// to recognise replays of an already committed epoch.
//
// txn imports only the writers contract, never a sink, nor gRPC: flightsvc
// maps the error classes (writers.ErrWrongState, ...) to status codes.
//
// # Test hook: crash points
//
// For process-level crash tests the environment variable QUIVER_TEST_CRASH,
// read once by Open, makes the process exit with status 137 (as if killed)
// at a named point:
//
//   - after-precommit: right after a precommit record is fsync'd, before
//     Precommit answers;
//   - after-commit-decision: right after a commit decision is fsync'd,
//     before any sink commits.
//
// Unset, it does nothing; any other value makes Open fail. Never set it in
// production.
package txn
