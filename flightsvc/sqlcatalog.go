package flightsvc

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"

	"github.com/quiver-ingest/quiver/writers"
)

// The Flight SQL listings: one catalog (Options.SQLCatalog) with one
// database schema (Options.SQLDBSchema) holding a table of type TABLE per endpoint the
// caller may use, with the endpoint's schema (empty while unknown), so
// that adbc_get_objects and SQL tools' browsers show the endpoints.

// sqlTableType is the one table type.
const sqlTableType = "TABLE"

// maxLikePattern bounds a filter pattern.
const maxLikePattern = 1024

// ticketInfo is the FlightInfo of a listing: one endpoint whose ticket is
// the command itself, which DoGet decodes again.
func (q *sqlServer) ticketInfo(d *flight.FlightDescriptor, schema *arrow.Schema) *flight.FlightInfo {
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: d.GetCmd()}}},
		FlightDescriptor: d,
		TotalRecords:     -1,
		TotalBytes:       -1,
		Schema:           flight.SerializeSchema(schema, q.Alloc),
	}
}

// rows answers a listing of schema: fill appends its rows.
func (q *sqlServer) rows(ctx context.Context, schema *arrow.Schema, fill func(b *array.RecordBuilder) error) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(q.Alloc, schema)
	defer b.Release()
	if err := fill(b); err != nil {
		return nil, nil, Status(err)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		return nil, nil, Status(err)
	}
	ch := make(chan flight.StreamChunk)
	go flight.StreamChunksFromReader(ctx, rdr, ch)
	return schema, ch, nil
}

func (q *sqlServer) GetFlightInfoCatalogs(_ context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return q.ticketInfo(d, schema_ref.Catalogs), nil
}

func (q *sqlServer) DoGetCatalogs(ctx context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return q.rows(ctx, schema_ref.Catalogs, func(b *array.RecordBuilder) error {
		b.Field(0).(*array.StringBuilder).Append(q.svc.sqlCatalog)
		return nil
	})
}

func (q *sqlServer) GetFlightInfoSchemas(_ context.Context, _ flightsql.GetDBSchemas, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return q.ticketInfo(d, schema_ref.DBSchemas), nil
}

func (q *sqlServer) DoGetDBSchemas(ctx context.Context, cmd flightsql.GetDBSchemas) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return q.rows(ctx, schema_ref.DBSchemas, func(b *array.RecordBuilder) error {
		ok, err := q.svc.inCatalog(cmd.GetCatalog(), cmd.GetDBSchemaFilterPattern())
		if ok {
			b.Field(0).(*array.StringBuilder).Append(q.svc.sqlCatalog)
			b.Field(1).(*array.StringBuilder).Append(q.svc.sqlDBSchema)
		}
		return err
	})
}

func (q *sqlServer) GetFlightInfoTableTypes(_ context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return q.ticketInfo(d, schema_ref.TableTypes), nil
}

func (q *sqlServer) DoGetTableTypes(ctx context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return q.rows(ctx, schema_ref.TableTypes, func(b *array.RecordBuilder) error {
		b.Field(0).(*array.StringBuilder).Append(sqlTableType)
		return nil
	})
}

func (q *sqlServer) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return q.ticketInfo(d, tablesSchema(cmd)), nil
}

func tablesSchema(cmd flightsql.GetTables) *arrow.Schema {
	if cmd.GetIncludeSchema() {
		return schema_ref.TablesWithIncludedSchema
	}
	return schema_ref.Tables
}

// DoGetTables lists the endpoints the caller may use that match the
// filters.
func (q *sqlServer) DoGetTables(ctx context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	s := q.svc
	return q.rows(ctx, tablesSchema(cmd), func(b *array.RecordBuilder) error {
		ok, err := s.inCatalog(cmd.GetCatalog(), cmd.GetDBSchemaFilterPattern())
		if !ok || err != nil {
			return err
		}
		if types := cmd.GetTableTypes(); len(types) > 0 && !slices.Contains(types, sqlTableType) {
			return nil
		}
		match, err := likeMatcher("table_name_filter_pattern", cmd.GetTableNameFilterPattern())
		if err != nil {
			return err
		}
		for _, name := range s.names {
			if !match(name) || s.allowEndpoint(ctx, name) != nil {
				continue
			}
			b.Field(0).(*array.StringBuilder).Append(s.sqlCatalog)
			b.Field(1).(*array.StringBuilder).Append(s.sqlDBSchema)
			b.Field(2).(*array.StringBuilder).Append(name)
			b.Field(3).(*array.StringBuilder).Append(sqlTableType)
			if cmd.GetIncludeSchema() {
				schema, err := s.schemaBytes(ctx, s.eps[name])
				if err != nil {
					return err
				}
				b.Field(4).(*array.BinaryBuilder).Append(schema)
			}
		}
		return nil
	})
}

// inCatalog reports whether the one database schema passes the catalog
// filter (nil: any; "": none, as the spec says) and the schema pattern.
func (s *Service) inCatalog(catalog, schemaPattern *string) (bool, error) {
	if catalog != nil && *catalog != s.sqlCatalog {
		return false, nil
	}
	match, err := likeMatcher("db_schema_filter_pattern", schemaPattern)
	if err != nil {
		return false, err
	}
	return match(s.sqlDBSchema), nil
}

// likeMatcher returns the matcher of a SQL LIKE pattern ("%" any
// substring, "_" any character); nil matches everything. The pattern is
// compiled to an RE2 expression, which matches in linear time.
func likeMatcher(field string, pattern *string) (func(string) bool, error) {
	if pattern == nil {
		return func(string) bool { return true }, nil
	}
	if len(*pattern) > maxLikePattern {
		return nil, writers.Errorf(writers.ErrInvalid, "flight sql: %s is %d bytes long, the maximum is %d", field, len(*pattern), maxLikePattern)
	}
	var re strings.Builder
	re.WriteString(`^(?s:`)
	for _, r := range *pattern {
		switch r {
		case '%':
			re.WriteString(`.*`)
		case '_':
			re.WriteString(`.`)
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re.WriteString(`)$`)
	rx, err := regexp.Compile(re.String())
	if err != nil {
		return nil, writers.Errorf(writers.ErrInvalid, "flight sql: %s: %v", field, err)
	}
	return rx.MatchString, nil
}
