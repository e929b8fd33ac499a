package flightsvc

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/quiver-ingest/quiver/writers"
)

// Flight SQL on Quiver's port: the part of Flight SQL that ingestion
// needs, so that ADBC's Flight SQL driver (adbc_ingest, ExecuteIngest)
// and SQL tools' browsers work unchanged. Flight SQL commands are
// google.protobuf.Any messages of the arrow.flight.protocol.sql package
// in a CMD descriptor, a ticket or an action body; Quiver's own
// descriptors are JSON, which never decodes as such an Any, so the two
// share every RPC. Commands outside the supported set answer
// Unimplemented naming the set (docs/flight.md, "Flight SQL").

// sqlTypePrefix is the type URL prefix of every Flight SQL command.
const sqlTypePrefix = "type.googleapis.com/arrow.flight.protocol.sql."

// sqlSupported names what Quiver serves of Flight SQL, for Unimplemented
// answers.
const sqlSupported = "Quiver serves CommandStatementIngest (DoPut), the actions BeginTransaction and EndTransaction, and CommandGetSqlInfo, CommandGetCatalogs, CommandGetDbSchemas, CommandGetTables and CommandGetTableTypes (GetFlightInfo, DoGet)"

// sqlQueries are the commands GetFlightInfo, GetSchema and DoGet serve.
var sqlQueries = map[protoreflect.FullName]bool{
	(&pb.CommandGetSqlInfo{}).ProtoReflect().Descriptor().FullName():    true,
	(&pb.CommandGetCatalogs{}).ProtoReflect().Descriptor().FullName():   true,
	(&pb.CommandGetDbSchemas{}).ProtoReflect().Descriptor().FullName():  true,
	(&pb.CommandGetTables{}).ProtoReflect().Descriptor().FullName():     true,
	(&pb.CommandGetTableTypes{}).ProtoReflect().Descriptor().FullName(): true,
}

// sqlActions are the Flight SQL action types DoAction serves; the other
// Flight SQL action types answer Unimplemented.
var sqlActions = map[string]bool{
	flightsql.BeginTransactionActionType: true,
	flightsql.EndTransactionActionType:   true,
}

var sqlOtherActions = map[string]bool{
	flightsql.CreatePreparedStatementActionType:     true,
	flightsql.ClosePreparedStatementActionType:      true,
	flightsql.CreatePreparedSubstraitPlanActionType: true,
	flightsql.CancelQueryActionType:                 true,
	flightsql.BeginSavepointActionType:              true,
	flightsql.EndSavepointActionType:                true,
}

// maxCommandBytes bounds a command (a descriptor's CMD, a ticket) before
// it is decoded: Quiver's own are JSON of a few hundred bytes and Flight
// SQL's a few names, while a decoded protobuf map or repeated field may
// take ten times its bytes.
const maxCommandBytes = 64 << 10

// sqlCommand decodes b as a Flight SQL command. ok is false when b is not
// a google.protobuf.Any of the Flight SQL package (a Quiver JSON
// descriptor, say); err is set when it is one but does not decode.
func sqlCommand(b []byte) (msg proto.Message, ok bool, err error) {
	if len(b) > maxCommandBytes {
		return nil, true, writers.Errorf(writers.ErrInvalid, "a command of %d bytes is over the limit of %d", len(b), maxCommandBytes)
	}
	var a anypb.Any
	if len(b) == 0 || proto.Unmarshal(b, &a) != nil || !strings.HasPrefix(a.GetTypeUrl(), sqlTypePrefix) {
		return nil, false, nil
	}
	msg, err = a.UnmarshalNew()
	if err != nil {
		return nil, true, writers.Errorf(writers.ErrInvalid, "flight sql: cannot decode %s: %v", a.GetTypeUrl(), err)
	}
	return msg, true, nil
}

// sqlUnsupported is the Unimplemented answer to a Flight SQL request
// Quiver does not serve.
func sqlUnsupported(what string) error {
	return status.Errorf(codes.Unimplemented, "flight sql: %s is not supported: Quiver only ingests data; %s", what, sqlSupported)
}

// sqlQuery returns the Flight SQL command of a GetFlightInfo or GetSchema
// descriptor or a DoGet ticket: ok is false when cmd is none, and err is
// set when it is one Quiver does not serve or cannot decode. The caller is
// authenticated first.
func (s *Service) sqlQuery(ctx context.Context, cmd []byte) (ok bool, err error) {
	msg, ok, err := sqlCommand(cmd)
	if !ok || err != nil {
		return ok, err
	}
	if _, err := s.caller(ctx); err != nil {
		return true, err
	}
	if name := msg.ProtoReflect().Descriptor().FullName(); !sqlQueries[name] {
		return true, sqlUnsupported(string(name.Name()))
	}
	return true, nil
}

// sqlGetFlightInfo answers GetFlightInfo for a Flight SQL command; handled
// is false when d is not one.
func (s *Service) sqlGetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, bool, error) {
	return sqlDescribe(ctx, s, d, s.sql.GetFlightInfo)
}

// sqlGetSchema is sqlGetFlightInfo for GetSchema.
func (s *Service) sqlGetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, bool, error) {
	return sqlDescribe(ctx, s, d, s.sql.GetSchema)
}

// sqlDescribe routes a descriptor that is a Flight SQL command Quiver
// serves to call; handled is false when d is not a Flight SQL command.
func sqlDescribe[T any](ctx context.Context, s *Service, d *flight.FlightDescriptor, call func(context.Context, *flight.FlightDescriptor) (T, error)) (res T, handled bool, err error) {
	if d.GetType() != flight.DescriptorCMD {
		return res, false, nil
	}
	if ok, err := s.sqlQuery(ctx, d.GetCmd()); !ok || err != nil {
		return res, ok, err
	}
	res, err = call(ctx, d)
	return res, true, err
}

// sqlDoAction runs a Flight SQL action; handled is false when a is none.
func (s *Service) sqlDoAction(a *flight.Action, stream flight.FlightService_DoActionServer) (handled bool, err error) {
	switch {
	case sqlActions[a.GetType()]:
		if _, err := s.caller(stream.Context()); err != nil {
			return true, err
		}
		return true, s.sql.DoAction(a, stream)
	case sqlOtherActions[a.GetType()]:
		return true, sqlUnsupported("action " + a.GetType())
	}
	return false, nil
}

// sqlServer is the flightsql.Server that the Flight SQL requests Quiver
// serves are routed to: listings, SqlInfo and transactions. Ingest runs
// in DoPut itself (sqlingest.go), through the same checks as every stream.
type sqlServer struct {
	flightsql.BaseServer
	svc *Service
	// info holds the SqlInfo ids registered.
	info map[uint32]bool
}

// newSQLServer builds the Flight SQL side of svc; version is the server's
// version for SqlInfo.
func newSQLServer(svc *Service, version string) (flight.FlightServer, error) {
	srv := &sqlServer{svc: svc, info: map[uint32]bool{}}
	srv.Alloc = svc.mem
	for id, v := range map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:                        "Quiver",
		flightsql.SqlInfoFlightSqlServerVersion:                     version,
		flightsql.SqlInfoFlightSqlServerArrowVersion:                arrowVersion(),
		flightsql.SqlInfoFlightSqlServerReadOnly:                    false,
		flightsql.SqlInfoFlightSqlServerSql:                         false,
		flightsql.SqlInfoFlightSqlServerSubstrait:                   false,
		flightsql.SqlInfoFlightSqlServerTransaction:                 int32(flightsql.SqlTransactionTransaction),
		flightsql.SqlInfoFlightSqlServerCancel:                      false,
		flightsql.SqlInfoFlightSqlServerBulkIngestion:               true,
		flightsql.SqlInfoFlightSqlServerIngestTransactionsSupported: true,
		flightsql.SqlInfoTransactionsSupported:                      true,
	} {
		if err := srv.RegisterSqlInfo(id, v); err != nil {
			return nil, fmt.Errorf("flightsvc: flight sql info %d: %w", id, err)
		}
		srv.info[uint32(id)] = true
	}
	return flightsql.NewFlightServerWithAllocator(srv, svc.mem), nil
}

// arrowVersion is the arrow-go module version built in.
func arrowVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if strings.HasPrefix(m.Path, "github.com/apache/arrow-go/") {
				return m.Version
			}
		}
	}
	return "unknown"
}

// sqlInfoIDs is a GetSqlInfo request.
type sqlInfoIDs []uint32

func (k sqlInfoIDs) GetInfo() []uint32 { return k }

// DoGetSqlInfo answers the registered ids among those asked (all when none
// is asked): the spec lets a server leave out what it does not know, and
// clients (ADBC) ask for more than Quiver can say.
func (q *sqlServer) DoGetSqlInfo(ctx context.Context, cmd flightsql.GetSqlInfo) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	asked := cmd.GetInfo()
	if len(asked) == 0 {
		return q.BaseServer.DoGetSqlInfo(ctx, cmd)
	}
	known := sqlInfoIDs{}
	seen := map[uint32]bool{}
	for _, id := range asked {
		if q.info[id] && !seen[id] { // each answered once, however often asked
			seen[id] = true
			known = append(known, id)
		}
	}
	if len(known) == 0 {
		ch := make(chan flight.StreamChunk)
		close(ch)
		return schema_ref.SqlInfo, ch, nil
	}
	return q.BaseServer.DoGetSqlInfo(ctx, known)
}
