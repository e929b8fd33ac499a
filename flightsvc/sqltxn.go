package flightsvc

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"

	"github.com/quiver-ingest/quiver/writers"
)

// Flight SQL transactions are Quiver transactions: BeginTransaction begins
// (writer, 0) under a fresh writer "flightsql-<random>", whose name is the
// transaction id; an ingest naming the id joins it, so its rows wait
// invisible; EndTransaction COMMIT precommits and commits it,
// ROLLBACK rolls it back. An abandoned one expires after txn.ttl like any
// transaction. Permissions are those of the actions begin, precommit and
// commit, and rollback.

// sqlWriterPrefix starts the writer name of every Flight SQL transaction.
const sqlWriterPrefix = "flightsql-"

// maxSQLTxnID bounds a transaction id: the prefix and rand.Text's 26
// characters.
const maxSQLTxnID = len(sqlWriterPrefix) + 26

// sqlTxnWriter returns the writer of a Flight SQL transaction id.
func sqlTxnWriter(what string, id []byte) (string, error) {
	w := string(id)
	if len(id) > maxSQLTxnID || !strings.HasPrefix(w, sqlWriterPrefix) || len(id) == len(sqlWriterPrefix) {
		return "", writers.Errorf(writers.ErrInvalid, "%s: %q is not a transaction id of this server (BeginTransaction answers them)", what, truncate(w, maxSQLTxnID))
	}
	return w, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// BeginTransaction begins a Quiver transaction and returns its id.
func (q *sqlServer) BeginTransaction(ctx context.Context, _ flightsql.ActionBeginTransactionRequest) ([]byte, error) {
	const what = "flight sql: BeginTransaction"
	s := q.svc
	if err := s.allowAction(ctx, "begin"); err != nil {
		return nil, Status(err)
	}
	actx, err := s.withAccess(ctx)
	if err != nil {
		return nil, Status(err)
	}
	writer := sqlWriterPrefix + rand.Text()
	if _, err := s.coord.Begin(actx, writer, 0, 0); err != nil {
		return nil, Status(fmt.Errorf("%s: %w", what, err))
	}
	return []byte(writer), nil
}

// EndTransaction commits (precommit, then commit) or rolls back the
// transaction.
func (q *sqlServer) EndTransaction(ctx context.Context, req flightsql.ActionEndTransactionRequest) error {
	const what = "flight sql: EndTransaction"
	writer, err := sqlTxnWriter(what, req.GetTransactionId())
	if err != nil {
		return Status(err)
	}
	return Status(q.svc.endSQLTxn(ctx, what, writer, req.GetAction()))
}

func (s *Service) endSQLTxn(ctx context.Context, what, writer string, action flightsql.EndTransactionRequestType) error {
	var ops []string
	switch action {
	case flightsql.EndTransactionCommit:
		ops = []string{"precommit", "commit"}
	case flightsql.EndTransactionRollback:
		ops = []string{"rollback"}
	default:
		return writers.Errorf(writers.ErrInvalid, "%s: action must be COMMIT or ROLLBACK, got %v", what, action)
	}
	for _, op := range ops {
		if err := s.allowAction(ctx, op); err != nil {
			return err
		}
	}
	ctx, err := s.withAccess(ctx)
	if err != nil {
		return err
	}
	if action == flightsql.EndTransactionRollback {
		if _, err := s.coord.Rollback(ctx, writer, 0); err != nil {
			return fmt.Errorf("%s: rollback %s: %w", what, writer, err)
		}
		return nil
	}
	if _, err := s.coord.Precommit(ctx, writer, 0); err != nil {
		return fmt.Errorf("%s: precommit %s: %w", what, writer, err)
	}
	start := time.Now()
	st, err := s.coord.Commit(ctx, writer, 0, nil)
	if err != nil {
		return fmt.Errorf("%s: commit %s: %w", what, writer, err)
	}
	s.countCommit(st, time.Since(start).Seconds(), resultCommitted)
	return nil
}
