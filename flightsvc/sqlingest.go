package flightsvc

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/quiver-ingest/quiver/txn"
	"github.com/quiver-ingest/quiver/writers"
)

// Flight SQL ingest (CommandStatementIngest) is a DoPut like any other:
// the table is the endpoint, the rows pass the same checks, budget and
// writer, and the stream is auto-commit, or joins the Flight SQL
// transaction it names (sqltxn.go). Only the acks differ: none per batch,
// and one DoPutUpdateResult with the row count at the end.

// overwriteMode is the endpoint mode whose every commit replaces the
// table (the Delta sink's), the only one a REPLACE ingest may use.
const overwriteMode = "overwrite"

// ingestTarget reads the DoPut target of a Flight SQL command, which must
// be a CommandStatementIngest. Errors are InvalidArgument or
// Unimplemented and name the field.
func ingestTarget(msg proto.Message) (putTarget, error) {
	cmd, ok := msg.(*pb.CommandStatementIngest)
	if !ok {
		return putTarget{}, sqlUnsupported(string(msg.ProtoReflect().Descriptor().Name()) + " in DoPut")
	}
	const what = "flight sql: CommandStatementIngest"
	bad := func(format string, args ...any) (putTarget, error) {
		return putTarget{}, writers.Errorf(writers.ErrInvalid, what+": "+format, args...)
	}
	switch {
	case cmd.GetTable() == "":
		return bad("table must name an endpoint")
	case cmd.GetTemporary():
		return bad("temporary tables are not supported: every table is a configured endpoint")
	case len(cmd.GetOptions()) > 0:
		keys := slices.Sorted(maps.Keys(cmd.GetOptions()))
		return bad("options are not supported, got %d, the first %q", len(keys), shown(keys[0]))
	}
	opts := cmd.GetTableDefinitionOptions()
	if opts == nil || opts.GetIfExists() == pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_UNSPECIFIED ||
		opts.GetIfNotExist() == pb.CommandStatementIngest_TableDefinitionOptions_TABLE_NOT_EXIST_OPTION_UNSPECIFIED {
		return bad("table_definition_options must set if_not_exist and if_exists")
	}
	t := putTarget{endpoint: cmd.GetTable(), ingest: cmd}
	if id := cmd.GetTransactionId(); id != nil {
		writer, err := sqlTxnWriter(what, id)
		if err != nil {
			return putTarget{}, err
		}
		t.txn, t.writer = true, writer
	}
	return t, nil
}

// checkIngest checks an ingest's catalog and schema (empty, or the
// configured names), maps its table definition options onto endpoint ep
// (which exists: endpoints are the tables), joins an ingest without a
// transaction id to its connection's transaction (sqltxn.go), and checks
// that the transaction is still open.
func (s *Service) checkIngest(ctx context.Context, ep *endpoint, t *putTarget) error {
	const what = "flight sql: CommandStatementIngest"
	if c := t.ingest.GetCatalog(); c != "" && c != s.sqlCatalog {
		return writers.Errorf(writers.ErrInvalid, "%s: catalog %q is unknown: leave it empty or use %q (flight_sql.catalog)", what, truncate(c, 128), s.sqlCatalog)
	}
	if d := t.ingest.GetSchema(); d != "" && d != s.sqlDBSchema {
		return writers.Errorf(writers.ErrInvalid, "%s: schema %q is unknown: leave it empty or use %q (flight_sql.db_schema)", what, truncate(d, 128), s.sqlDBSchema)
	}
	opts := t.ingest.GetTableDefinitionOptions()
	switch opts.GetIfExists() {
	case pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_FAIL:
		// What ADBC's mode "create" expects when the table exists.
		return status.Errorf(codes.AlreadyExists, "flight sql: table %q exists (every endpoint does; Quiver creates none): ingest with mode append (ADBC: mode=\"append\" or \"create_append\")", ep.Name)
	case pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_APPEND:
		if ep.Mode == overwriteMode {
			return writers.Errorf(writers.ErrWrongState, "flight sql: table %q is an overwrite endpoint: every commit replaces it, so ingest with mode replace", ep.Name)
		}
	case pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_REPLACE:
		if ep.Mode != overwriteMode {
			return writers.Errorf(writers.ErrWrongState, "flight sql: table %q cannot be replaced: its endpoint's mode is %q, only overwrite endpoints replace; ingest with mode append", ep.Name, modeName(ep.Mode))
		}
	default:
		return writers.Errorf(writers.ErrInvalid, "%s: if_exists %v is not a known option", what, opts.GetIfExists())
	}
	if !t.txn {
		writer, ok := s.connTxns.get(ctx, s)
		if !ok {
			return nil
		}
		t.txn, t.writer = true, writer
	}
	actx, err := s.withAccess(ctx) // another token's transaction is not found
	if err != nil {
		return err
	}
	actx = serverNamed(actx)
	st, err := s.coord.Status(actx, t.writer, t.epoch)
	if err != nil {
		return fmt.Errorf("flight sql: ingest in transaction %s: %w", t.writer, err)
	}
	if st.State != txn.StateOpen {
		return writers.Errorf(writers.ErrWrongState, "flight sql: transaction %s has ended (%s): begin another", t.writer, st.State)
	}
	// The transaction id names this transaction alone: its ingests join
	// its attempt whatever connection they come on.
	t.attempt = st.Attempt
	return nil
}

func modeName(mode string) string {
	if mode == "" {
		return "none"
	}
	return mode
}

// sqlAckStream is a DoPut stream answering as Flight SQL does: the
// per-batch acks are dropped (a Flight SQL client reads nothing before it
// has sent everything), and the final ack becomes a DoPutUpdateResult
// with the row count (sendFinal).
type sqlAckStream struct {
	flight.FlightService_DoPutServer
}

// Send drops a per-batch ack.
func (sqlAckStream) Send(*flight.PutResult) error { return nil }

// final sends the DoPutUpdateResult of a final ack.
func (a sqlAckStream) final(ack any) error {
	var rows int64
	switch ack := ack.(type) {
	case committedAck:
		rows = ack.Rows
	case stagedAck:
		rows = ack.Rows
	default:
		return fmt.Errorf("flight sql: unexpected final ack %T", ack)
	}
	b, err := proto.Marshal(&pb.DoPutUpdateResult{RecordCount: rows})
	if err != nil {
		return err
	}
	return a.FlightService_DoPutServer.Send(&flight.PutResult{AppMetadata: b})
}
