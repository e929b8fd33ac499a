package flightsvc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/quiver-ingest/quiver/flightsvc"
	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

// sqlClient is arrow-go's Flight SQL client over the test server's
// connection.
func (s *server) sqlClient() *flightsql.Client {
	return &flightsql.Client{Client: s.client, Alloc: s.mem}
}

// ingestOpts is an ingest into table with ADBC's mode append.
func ingestOpts(table string) *flightsql.ExecuteIngestOpts {
	return &flightsql.ExecuteIngestOpts{
		Table: table,
		TableDefinitionOptions: &flightsql.TableDefinitionOptions{
			IfNotExist: pb.CommandStatementIngest_TableDefinitionOptions_TABLE_NOT_EXIST_OPTION_FAIL,
			IfExists:   pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_APPEND,
		},
	}
}

// beginSQL begins a Flight SQL transaction and returns it with ingest
// options naming it, into endpoint "events".
func (s *server) beginSQL(ctx context.Context) (*flightsql.Txn, *flightsql.ExecuteIngestOpts) {
	s.t.Helper()
	tx, err := s.sqlClient().BeginTransaction(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	opts := ingestOpts("events")
	opts.TransactionId = tx.ID()
	return tx, opts
}

// ingest sends batches of rows rows each with ExecuteIngest.
func (s *server) ingest(ctx context.Context, opts *flightsql.ExecuteIngestOpts, rows ...int) (int64, error) {
	recs := make([]arrow.RecordBatch, len(rows))
	for i, n := range rows {
		recs[i] = s.record(n)
		defer recs[i].Release()
	}
	rdr, err := array.NewRecordReader(testSchema(), recs)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rdr.Release()
	return s.sqlClient().ExecuteIngest(ctx, rdr, opts)
}

func TestSQLIngestAutoCommit(t *testing.T) {
	s := startServer(t, serverConfig{})
	n, err := s.ingest(t.Context(), ingestOpts("events"), 3, 5, 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.sinks["events"].Committed().Rows; n != 15 || got != 15 {
		t.Fatalf("ingest answered %d rows, the sink committed %d; want 15", n, got)
	}
	// Catalog and schema as listed are accepted.
	opts := ingestOpts("events")
	cat, sch := "quiver", "public"
	opts.Catalog, opts.Schema = &cat, &sch
	if _, err := s.ingest(t.Context(), opts, 2); err != nil {
		t.Fatal(err)
	}
	if got := s.sinks["events"].Committed().Rows; got != 17 {
		t.Fatalf("committed %d rows, want 17", got)
	}
}

// TestSQLConfiguredNames: with flight_sql's catalog and schema set, the
// listings show them, an ingest may name them, and the defaults are
// unknown names like any other.
func TestSQLConfiguredNames(t *testing.T) {
	s := startServer(t, serverConfig{sqlCatalog: "lake", sqlDBSchema: "raw"})
	ctx := t.Context()
	str := func(v string) *string { return &v }
	opts := ingestOpts("events")
	opts.Catalog, opts.Schema = str("lake"), str("raw")
	if _, err := s.ingest(ctx, opts, 2); err != nil {
		t.Fatal(err)
	}
	opts.Catalog = str("quiver")
	_, err := s.ingest(ctx, opts, 2)
	wantCode(t, err, codes.InvalidArgument, `catalog "quiver" is unknown`, `"lake"`, "flight_sql.catalog")
	opts.Catalog, opts.Schema = nil, str("public")
	_, err = s.ingest(ctx, opts, 2)
	wantCode(t, err, codes.InvalidArgument, `schema "public" is unknown`, `"raw"`, "flight_sql.db_schema")
	if got := s.sinks["events"].Committed().Rows; got != 2 {
		t.Fatalf("committed %d rows, want 2", got)
	}

	c := s.sqlClient()
	info, err := c.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{Catalog: str("lake")})
	if err != nil {
		t.Fatal(err)
	}
	recs := readAll(ctx, t, c, info)
	if len(recs) != 1 || recs[0].NumRows() != 1 || recs[0].Column(0).ValueStr(0) != "lake" || recs[0].Column(1).ValueStr(0) != "raw" {
		t.Fatalf("schemas of lake: %v", recs)
	}
	recs[0].Release()
	info, err = c.GetTables(ctx, &flightsql.GetTablesOpts{Catalog: str("quiver")})
	if err != nil {
		t.Fatal(err)
	}
	recs = readAll(ctx, t, c, info)
	if len(recs) != 1 || recs[0].NumRows() != 0 {
		t.Fatalf("tables of catalog quiver: %v, want none", recs)
	}
	recs[0].Release()
}

func TestSQLIngestTransactions(t *testing.T) {
	s := startServer(t, serverConfig{})
	ctx := t.Context()
	c := s.sqlClient()
	sink := s.sinks["events"]

	tx, err := c.BeginTransaction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	opts := ingestOpts("events")
	opts.TransactionId = tx.ID()
	if n, err := s.ingest(ctx, opts, 4, 6); err != nil || n != 10 {
		t.Fatalf("ingest in a transaction: %d rows, %v", n, err)
	}
	if got := sink.Committed().Rows; got != 0 {
		t.Fatalf("%d rows visible before the commit", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sink.Committed().Rows; got != 10 {
		t.Fatalf("committed %d rows, want 10", got)
	}
	// The transaction has ended: another ingest naming it is refused.
	_, err = s.ingest(ctx, opts, 1)
	wantCode(t, err, codes.FailedPrecondition, "has ended")

	tx, err = c.BeginTransaction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	opts.TransactionId = tx.ID()
	if _, err := s.ingest(ctx, opts, 5); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sink.Committed().Rows; got != 10 || sink.OpenKeys() != 0 {
		t.Fatalf("after a rollback: %d rows committed, %d keys open; want 10, 0", got, sink.OpenKeys())
	}

	// An ingest without a transaction id (as ADBC's driver sends them)
	// joins the transaction open on its connection.
	tx, err = c.BeginTransaction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ingest(ctx, ingestOpts("events"), 3); err != nil {
		t.Fatal(err)
	}
	if got := sink.Committed().Rows; got != 10 {
		t.Fatalf("%d rows visible before the connection's transaction committed, want 10", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sink.Committed().Rows; got != 13 {
		t.Fatalf("committed %d rows, want 13", got)
	}
	// Once it has ended, ingests are auto-commit again.
	if _, err := s.ingest(ctx, ingestOpts("events"), 1); err != nil || sink.Committed().Rows != 14 {
		t.Fatalf("auto-commit after the transaction: %d rows, %v", sink.Committed().Rows, err)
	}

	// A transaction without an ingest commits nothing, and succeeds.
	tx, err = c.BeginTransaction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSQLIngestRefused(t *testing.T) {
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": discard.New(nil), "snapshots": discard.New(nil)}})
	ctx := t.Context()
	with := func(f func(o *flightsql.ExecuteIngestOpts)) *flightsql.ExecuteIngestOpts {
		o := ingestOpts("events")
		f(o)
		return o
	}
	str := func(v string) *string { return &v }
	for _, tc := range []struct {
		name      string
		opts      *flightsql.ExecuteIngestOpts
		code      codes.Code
		fragments []string
	}{
		{"create on an existing table", with(func(o *flightsql.ExecuteIngestOpts) {
			o.TableDefinitionOptions.IfExists = pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_FAIL
		}), codes.AlreadyExists, []string{`"events" exists`, "append"}},
		{"replace on an append endpoint", with(func(o *flightsql.ExecuteIngestOpts) {
			o.TableDefinitionOptions.IfExists = pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_REPLACE
		}), codes.FailedPrecondition, []string{"cannot be replaced", "overwrite"}},
		{"unknown table", ingestOpts("nope"), codes.NotFound, []string{`"nope"`, "events, snapshots"}},
		{"other catalog", with(func(o *flightsql.ExecuteIngestOpts) { o.Catalog = str("main") }), codes.InvalidArgument, []string{`catalog "main"`, `"quiver"`}},
		{"other schema", with(func(o *flightsql.ExecuteIngestOpts) { o.Schema = str("dbo") }), codes.InvalidArgument, []string{`schema "dbo"`}},
		{"temporary", with(func(o *flightsql.ExecuteIngestOpts) { o.Temporary = true }), codes.InvalidArgument, []string{"temporary"}},
		{"options", with(func(o *flightsql.ExecuteIngestOpts) { o.Options = map[string]string{"k": "v"} }), codes.InvalidArgument, []string{"options", "k"}},
		{"unspecified if_exists", with(func(o *flightsql.ExecuteIngestOpts) {
			o.TableDefinitionOptions.IfExists = pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_UNSPECIFIED
		}), codes.InvalidArgument, []string{"if_exists"}},
		{"foreign transaction id", with(func(o *flightsql.ExecuteIngestOpts) { o.TransactionId = []byte("other-txn") }), codes.InvalidArgument, []string{"not a transaction id"}},
		{"unknown transaction", with(func(o *flightsql.ExecuteIngestOpts) { o.TransactionId = []byte("flightsql-NOTBEGUN") }), codes.NotFound, []string{"flightsql-NOTBEGUN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.ingest(ctx, tc.opts, 3)
			wantCode(t, err, tc.code, tc.fragments...)
		})
	}
	if got := s.sinks["events"].Committed().Rows; got != 0 {
		t.Fatalf("refused ingests committed %d rows", got)
	}
}

// TestSQLIngestReplace: only an overwrite endpoint takes REPLACE, and it
// refuses APPEND.
func TestSQLIngestReplace(t *testing.T) {
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"snap": discard.New(nil)}, modes: map[string]string{"snap": "overwrite"}})
	opts := ingestOpts("snap")
	_, err := s.ingest(t.Context(), opts, 2)
	wantCode(t, err, codes.FailedPrecondition, "overwrite endpoint", "replace")
	opts.TableDefinitionOptions.IfExists = pb.CommandStatementIngest_TableDefinitionOptions_TABLE_EXISTS_OPTION_REPLACE
	if n, err := s.ingest(t.Context(), opts, 2); err != nil || n != 2 {
		t.Fatalf("replace: %d rows, %v", n, err)
	}
}

func TestSQLMetadata(t *testing.T) {
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": discard.New(testSchema()), "clicks": discard.New(nil)}})
	ctx := t.Context()
	c := s.sqlClient()

	info, err := c.GetSqlInfo(ctx, []flightsql.SqlInfo{flightsql.SqlInfoFlightSqlServerName, flightsql.SqlInfoFlightSqlServerBulkIngestion, flightsql.SqlInfoFlightSqlServerTransaction, flightsql.SqlInfoKeywords})
	if err != nil {
		t.Fatal(err)
	}
	rows := readAll(ctx, t, c, info)
	got := map[uint32]any{}
	for _, rec := range rows {
		ids := rec.Column(0).(*array.Uint32)
		vals := rec.Column(1).(*array.DenseUnion)
		for i := range int(rec.NumRows()) {
			got[ids.Value(i)] = vals.Field(vals.ChildID(i)).GetOneForMarshal(int(vals.ValueOffset(i)))
		}
		rec.Release()
	}
	if len(got) != 3 || got[uint32(flightsql.SqlInfoFlightSqlServerName)] != "Quiver" ||
		got[uint32(flightsql.SqlInfoFlightSqlServerBulkIngestion)] != true ||
		got[uint32(flightsql.SqlInfoFlightSqlServerTransaction)] != int32(flightsql.SqlTransactionTransaction) {
		t.Fatalf("sql info: %v", got)
	}

	info, err = c.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rec := range readAll(ctx, t, c, info) {
		for i := range int(rec.NumRows()) {
			names = append(names, rec.Column(0).ValueStr(i)+"."+rec.Column(1).ValueStr(i)+"."+rec.Column(2).ValueStr(i))
			if rec.Column(2).ValueStr(i) == "events" {
				schema, err := flight.DeserializeSchema(rec.Column(4).(*array.Binary).Value(i), s.mem)
				if err != nil || !schema.Equal(testSchema()) {
					t.Fatalf("events' schema: %v, %v", schema, err)
				}
			}
		}
		rec.Release()
	}
	if len(names) != 2 || names[0] != "quiver.public.clicks" || names[1] != "quiver.public.events" {
		t.Fatalf("tables: %v", names)
	}
	pattern := "ev%"
	info, err = c.GetTables(ctx, &flightsql.GetTablesOpts{TableNameFilterPattern: &pattern})
	if err != nil {
		t.Fatal(err)
	}
	recs := readAll(ctx, t, c, info)
	if len(recs) != 1 || recs[0].NumRows() != 1 || recs[0].Column(2).ValueStr(0) != "events" || recs[0].NumCols() != 4 {
		t.Fatalf("tables like ev%%: %v", recs)
	}
	recs[0].Release()

	info, err = c.GetCatalogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recs = readAll(ctx, t, c, info)
	if len(recs) != 1 || recs[0].Column(0).ValueStr(0) != "quiver" {
		t.Fatalf("catalogs: %v", recs)
	}
	recs[0].Release()

	// What Quiver does not serve answers Unimplemented naming what it does.
	_, err = c.Execute(ctx, "SELECT 1")
	wantCode(t, err, codes.Unimplemented, "CommandStatementQuery", "CommandStatementIngest")
	_, err = c.Prepare(ctx, "SELECT 1")
	wantCode(t, err, codes.Unimplemented, "CreatePreparedStatement", "CommandStatementIngest")
	_, err = c.ExecuteUpdate(ctx, "DELETE FROM events")
	wantCode(t, err, codes.Unimplemented, "CommandStatementUpdate", "CommandStatementIngest")
	// Quiver's own JSON descriptors still work beside Flight SQL.
	if _, err := s.put(ctx, pathDesc("events"), 1); err != nil {
		t.Fatal(err)
	}
}

// TestSQLAuth: listings show only the endpoints a token may use, and
// ingest and transactions need the grants of the matching actions.
func TestSQLAuth(t *testing.T) {
	s := startServer(t, serverConfig{
		endpoints: map[string]writers.Writer{"events": discard.New(nil), "secret": discard.New(nil)},
		tokens: []flightsvc.Token{
			{Name: "ingest", Secret: "s1", Endpoints: []string{"events"}, Actions: []string{"*"}},
			{Name: "auto", Secret: "s2", Endpoints: []string{"events"}},
		},
	})
	c := s.sqlClient()
	ctx := bearer(t.Context(), "s1")
	info, err := c.GetTables(ctx, &flightsql.GetTablesOpts{})
	if err != nil {
		t.Fatal(err)
	}
	recs := readAll(ctx, t, c, info)
	if len(recs) != 1 || recs[0].NumRows() != 1 || recs[0].Column(2).ValueStr(0) != "events" {
		t.Fatalf("tables for a token limited to events: %v", recs)
	}
	recs[0].Release()
	_, err = s.ingest(ctx, ingestOpts("secret"), 1)
	wantCode(t, err, codes.PermissionDenied, `"secret"`)
	_, err = c.GetTables(t.Context(), &flightsql.GetTablesOpts{})
	wantCode(t, err, codes.Unauthenticated)
	// Auto-commit ingest needs no action grant; a transaction does.
	auto := bearer(t.Context(), "s2")
	if _, err := s.ingest(auto, ingestOpts("events"), 1); err != nil {
		t.Fatal(err)
	}
	_, err = c.BeginTransaction(auto)
	wantCode(t, err, codes.PermissionDenied, `"begin"`)
}

// readAll reads every batch of every endpoint of info.
func readAll(ctx context.Context, t *testing.T, c *flightsql.Client, info *flight.FlightInfo) []arrow.RecordBatch {
	t.Helper()
	var out []arrow.RecordBatch
	for _, ep := range info.GetEndpoint() {
		rdr, err := c.DoGet(ctx, ep.GetTicket())
		if err != nil {
			t.Fatal(err)
		}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			rec.Retain()
			out = append(out, rec)
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		rdr.Release()
	}
	return out
}

// TestSQLHostile: malformed Flight SQL commands are InvalidArgument, and
// the server keeps serving.
func TestSQLHostile(t *testing.T) {
	s := startServer(t, serverConfig{})
	ctx := t.Context()
	garbage, err := anypb.New(&pb.CommandGetTables{})
	if err != nil {
		t.Fatal(err)
	}
	garbage.Value = []byte{0xff, 0xff, 0xff}
	cmd, err := proto.Marshal(garbage)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
	wantCode(t, err, codes.InvalidArgument, "CommandGetTables")
	_, err = s.put(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}, 1)
	wantCode(t, err, codes.InvalidArgument, "CommandGetTables")

	// A filter pattern is bounded; the listing fails when it is read.
	long := strings.Repeat("%_", 1000)
	info, err := s.sqlClient().GetTables(ctx, &flightsql.GetTablesOpts{TableNameFilterPattern: &long})
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := s.sqlClient().DoGet(ctx, info.GetEndpoint()[0].GetTicket())
	if err == nil {
		for rdr.Next() {
		}
		err = rdr.Err()
		rdr.Release()
	}
	wantCode(t, err, codes.InvalidArgument, "table_name_filter_pattern", "maximum is 1024")

	end, err := anypb.New(&pb.ActionEndTransactionRequest{TransactionId: []byte(strings.Repeat("x", 1<<16)), Action: pb.ActionEndTransactionRequest_END_TRANSACTION_COMMIT})
	if err != nil {
		t.Fatal(err)
	}
	body, err := proto.Marshal(end)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.actionRaw(ctx, flightsql.EndTransactionActionType, string(body))
	wantCode(t, err, codes.InvalidArgument, "not a transaction id")

	if n, err := s.ingest(ctx, ingestOpts("events"), 2); err != nil || n != 2 {
		t.Fatalf("after hostile requests: %d rows, %v", n, err)
	}
}

// TestHostileRequestSizes: what a client controls outside the Arrow stream
// is bounded before it is decoded or quoted: a GetSqlInfo asking one id
// 10,000 times answers it once (each asked id was a row), a command or an
// action body over its limit is InvalidArgument, and a megabyte-long
// endpoint name is not echoed whole.
func TestHostileRequestSizes(t *testing.T) {
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": discard.New(testSchema())}})
	ctx := t.Context()
	c := s.sqlClient()

	ids := make([]flightsql.SqlInfo, 10_000)
	for i := range ids {
		ids[i] = flightsql.SqlInfoFlightSqlServerName
	}
	info, err := c.GetSqlInfo(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, rec := range readAll(ctx, t, c, info) {
		rows += rec.NumRows()
		rec.Release()
	}
	if rows != 1 {
		t.Errorf("GetSqlInfo of one id asked 10,000 times: %d rows, want 1", rows)
	}

	opts := ingestOpts("events")
	opts.Options = map[string]string{}
	for i := range 20_000 {
		opts.Options[fmt.Sprintf("option-%05d", i)] = "v"
	}
	_, err = s.ingest(ctx, opts, 2)
	wantCode(t, err, codes.InvalidArgument, "over the limit")
	if len(err.Error()) > 1024 {
		t.Errorf("the refusal of 20,000 ingest options is %d bytes long", len(err.Error()))
	}

	_, err = s.actionRaw(ctx, "status", `{"writer":"`+strings.Repeat("w", 2<<20)+`","epoch":1}`)
	wantCode(t, err, codes.InvalidArgument, "over the limit")

	_, err = s.client.GetSchema(ctx, pathDesc(strings.Repeat("x", 1<<20)))
	if err == nil || len(err.Error()) > 1024 {
		t.Errorf("GetSchema of a 1 MiB endpoint name: an error of %d bytes, want a short one", len(fmt.Sprint(err)))
	}
}

// refusingCommits is a discard sink whose commits are refused for good
// (a table created meanwhile with other columns).
type refusingCommits struct{ *discard.Writer }

func (refusingCommits) Commit(context.Context, writers.TxnKey, []writers.Descriptor) (writers.CommitInfo, error) {
	return writers.CommitInfo{}, writers.Errorf(writers.ErrInvalid, "the table was created meanwhile with other columns")
}

// TestSQLCommitRefusedEverywhere: a Flight SQL transaction whose commit
// every endpoint refuses is undone (InvalidArgument, nothing published)
// owing no replay (txn.Options.OneEpoch): its writer is its own, no
// later epoch could commit first, and an owing transaction would never be
// forgotten.
func TestSQLCommitRefusedEverywhere(t *testing.T) {
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{"events": refusingCommits{discard.New(nil)}}})
	ctx := t.Context()
	tx, opts := s.beginSQL(ctx)
	if _, err := s.ingest(ctx, opts, 3); err != nil {
		t.Fatal(err)
	}
	writer := string(tx.ID()) // the server's writer name for the transaction
	wantCode(t, tx.Commit(ctx), codes.InvalidArgument, "begin the epoch again and replay it")
	if st := s.mustAction("status", fmt.Sprintf(`{"writer":%q,"epoch":0}`, writer)); st["state"] != "aborted" {
		t.Fatalf("status after the refused commit: %v, want aborted", st)
	}
	if owing := s.metric("quiver_transactions_owing_replay", nil); owing != 0 {
		t.Fatalf("%v epochs owing their replay, want none", owing)
	}
	// Its writer has no other epoch, so none could commit first.
	_, err := s.action(t.Context(), "begin", fmt.Sprintf(`{"writer":%q,"epoch":1}`, writer))
	wantCode(t, err, codes.InvalidArgument, "only epoch is 0")

	// Only BeginTransaction's shape is a Flight SQL writer.
	for _, tc := range []struct {
		writer string
		want   bool
	}{
		{writer, true},
		{"flightsql-nightly", false},
		{strings.ToLower(writer), false},
		{writer + "A", false},
		{strings.TrimPrefix(writer, "flightsql-"), false},
	} {
		if got := flightsvc.IsSQLWriter(tc.writer); got != tc.want {
			t.Errorf("IsSQLWriter(%q) = %v, want %v", tc.writer, got, tc.want)
		}
	}
}
