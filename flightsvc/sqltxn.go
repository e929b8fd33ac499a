package flightsvc

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/peer"

	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// Flight SQL transactions are Quiver transactions: BeginTransaction begins
// (writer, 0) under a fresh writer "flightsql-<random>", whose name is the
// transaction id; an ingest naming the id joins it, so its rows wait
// invisible; EndTransaction COMMIT precommits and commits it,
// ROLLBACK rolls it back. An abandoned one expires after txn.ttl like any
// transaction. Permissions are those of the actions begin, precommit and
// commit, and rollback.
//
// ADBC's Flight SQL driver begins a transaction when autocommit is off but
// sends bulk ingests without its id. So that its ingests still land in
// the transaction, an ingest without an id joins the Flight SQL
// transaction open on the same gRPC connection by the same token, if
// there is one (connTxns); otherwise it is auto-commit.

// sqlWriterPrefix starts the writer name of every Flight SQL transaction.
const sqlWriterPrefix = "flightsql-"

// maxSQLTxnID bounds a transaction id: the prefix and rand.Text's 26
// characters.
const maxSQLTxnID = len(sqlWriterPrefix) + 26

// IsSQLWriter reports whether writer has the shape of a Flight SQL
// transaction's (BeginTransaction's: "flightsql-" and rand.Text's 26
// characters), whose only epoch is 0 (txn.Options.OneEpoch).
func IsSQLWriter(writer string) bool {
	id, ok := strings.CutPrefix(writer, sqlWriterPrefix)
	return ok && len(id) == 26 && strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") == ""
}

// sqlTxnWriter returns the writer of a Flight SQL transaction id.
func sqlTxnWriter(what string, id []byte) (string, error) {
	w := string(id)
	if len(id) > maxSQLTxnID || !strings.HasPrefix(w, sqlWriterPrefix) || len(id) == len(sqlWriterPrefix) {
		return "", writers.Errorf(writers.ErrInvalid, "%s: %q is not a transaction id of this server (BeginTransaction answers them)", what, truncate(w, maxSQLTxnID))
	}
	return w, nil
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
	actx = serverNamed(actx)
	writer := sqlWriterPrefix + rand.Text()
	if _, err := s.coord.Begin(actx, writer, 0, 0); err != nil {
		return nil, Status(fmt.Errorf("%s: %w", what, err))
	}
	s.connTxns.set(ctx, s, writer)
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
	err = q.svc.endSQLTxn(ctx, what, writer, req.GetAction())
	if err == nil {
		q.svc.connTxns.drop(ctx, q.svc, writer)
	}
	return Status(err)
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
	ctx = serverNamed(ctx)
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

// maxConnTxns is how many connection transactions are remembered before
// the ended ones are swept.
const maxConnTxns = 1024

// connTxns remembers the Flight SQL transaction last begun on each gRPC
// connection by each token.
type connTxns struct {
	mu sync.Mutex
	m  map[connKey]string // → writer
}

// connKey is a gRPC connection (the peer's address) and a token name ("":
// auth disabled).
type connKey struct{ peer, token string }

func (c *connTxns) key(ctx context.Context, s *Service) (connKey, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return connKey{}, false
	}
	k := connKey{peer: p.Addr.String()}
	if tok, err := s.caller(ctx); err == nil && tok != nil {
		k.token = tok.Name
	}
	return k, true
}

// locked runs f under the lock with the map and the key of ctx's
// connection; not at all when ctx has no peer.
func (c *connTxns) locked(ctx context.Context, s *Service, f func(m map[connKey]string, k connKey)) {
	k, ok := c.key(ctx, s)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[connKey]string)
	}
	f(c.m, k)
}

func (c *connTxns) set(ctx context.Context, s *Service, writer string) {
	c.locked(ctx, s, func(m map[connKey]string, k connKey) {
		if len(m) >= maxConnTxns {
			// Forget transactions that ended without EndTransaction
			// (expired, or their connection went away).
			for k, w := range m {
				if st, err := s.coord.Status(ctx, w, 0); err != nil || st.State != txn.StateOpen {
					delete(m, k)
				}
			}
		}
		m[k] = writer
	})
}

func (c *connTxns) drop(ctx context.Context, s *Service, writer string) {
	c.locked(ctx, s, func(m map[connKey]string, k connKey) {
		if m[k] == writer {
			delete(m, k)
		}
	})
}

// get returns the writer of the transaction open on ctx's connection.
func (c *connTxns) get(ctx context.Context, s *Service) (writer string, ok bool) {
	c.locked(ctx, s, func(m map[connKey]string, k connKey) { writer, ok = m[k] })
	return writer, ok
}
