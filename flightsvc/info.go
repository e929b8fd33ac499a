package flightsvc

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiver-ingest/quiver/writers"
)

// ListFlights answers one FlightInfo per endpoint the caller may use, as
// GetFlightInfo does. The criteria are ignored.
func (s *Service) ListFlights(_ *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	ctx := stream.Context()
	for _, name := range s.names {
		if s.allowEndpoint(ctx, name) != nil {
			continue
		}
		info, err := s.flightInfo(ctx, s.eps[name])
		if err != nil {
			return Status(err)
		}
		if err := stream.Send(info); err != nil {
			return err
		}
	}
	return nil
}

// GetFlightInfo describes the endpoint named by a PATH descriptor
// ["<endpoint>"]: the descriptor and the endpoint's schema. Quiver serves
// no reads, so the info lists no Flight endpoints (tickets) and unknown
// record and byte counts (-1).
func (s *Service) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if info, ok, err := s.sqlGetFlightInfo(ctx, d); ok {
		return info, Status(err)
	}
	e, err := s.describe(ctx, "getflightinfo", d)
	if err != nil {
		return nil, Status(err)
	}
	info, err := s.flightInfo(ctx, e)
	return info, Status(err)
}

// GetSchema returns the schema of the endpoint named by a PATH descriptor.
// An endpoint whose schema is not known yet (no table, or a sink without
// schemas such as discard) answers an empty schema, meaning any schema is
// accepted; the first stream defines it. An unknown endpoint is NotFound.
func (s *Service) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	if res, ok, err := s.sqlGetSchema(ctx, d); ok {
		return res, Status(err)
	}
	e, err := s.describe(ctx, "getschema", d)
	if err != nil {
		return nil, Status(err)
	}
	schema, err := s.schemaBytes(ctx, e)
	if err != nil {
		return nil, Status(err)
	}
	return &flight.SchemaResult{Schema: schema}, nil
}

// DoGet serves only the Flight SQL listings (sqlcatalog.go): Quiver
// ingests, it does not serve reads.
func (s *Service) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	if ok, err := s.sqlQuery(stream.Context(), t.GetTicket()); ok {
		if err != nil {
			return Status(err)
		}
		return Status(s.sql.DoGet(t, stream))
	}
	return status.Error(codes.Unimplemented, "doget: quiver only ingests data: read the sink (Delta table, Kafka topic, Lance dataset) directly")
}

// DoExchange is not served.
func (s *Service) DoExchange(flight.FlightService_DoExchangeServer) error {
	return status.Error(codes.Unimplemented, "doexchange: not supported: send data with DoPut")
}

// describe resolves a PATH descriptor to an endpoint the caller may use.
func (s *Service) describe(ctx context.Context, what string, d *flight.FlightDescriptor) (*endpoint, error) {
	name, err := parsePathDescriptor(what, d)
	if err != nil {
		return nil, err
	}
	e, err := s.endpoint(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return e, nil
}

func (s *Service) flightInfo(ctx context.Context, e *endpoint) (*flight.FlightInfo, error) {
	schema, err := s.schemaBytes(ctx, e)
	if err != nil {
		return nil, err
	}
	return &flight.FlightInfo{
		Schema:           schema,
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{e.Name}},
		TotalRecords:     -1,
		TotalBytes:       -1,
	}, nil
}

// schemaBytes serializes e's schema for FlightInfo and SchemaResult; an
// unknown schema is the empty schema.
func (s *Service) schemaBytes(ctx context.Context, e *endpoint) ([]byte, error) {
	schema, err := writers.SchemaOf(ctx, e.Writer)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: read its schema: %w", e.Name, err)
	}
	if schema == nil {
		schema = arrow.NewSchema(nil, nil)
	}
	return flight.SerializeSchema(schema, s.mem), nil
}
