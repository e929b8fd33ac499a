package flightsvc_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiver-ingest/quiver/writers"
	"github.com/quiver-ingest/quiver/writers/discard"
)

func TestListAndSchemas(t *testing.T) {
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{
		"events": discard.New(nil),
		"fixed":  discard.New(testSchema()),
	}})

	actions, err := s.client.ListActions(t.Context(), &flight.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for {
		a, err := actions.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if a.GetDescription() == "" {
			t.Errorf("action %q has no description", a.GetType())
		}
		types = append(types, a.GetType())
	}
	want := []string{"begin", "precommit", "commit", "rollback", "status", "committed-epoch", "endpoints", "health", "optimize", "vacuum"}
	if !reflect.DeepEqual(types, want) {
		t.Fatalf("ListActions = %v, want %v", types, want)
	}

	flights, err := s.client.ListFlights(t.Context(), &flight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*arrow.Schema{}
	for {
		info, err := flights.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		d := info.GetFlightDescriptor()
		if d.GetType() != flight.DescriptorPATH || len(d.GetPath()) != 1 {
			t.Fatalf("flight descriptor %v, want PATH [endpoint]", d)
		}
		schemas[d.GetPath()[0]], err = flight.DeserializeSchema(info.GetSchema(), s.mem)
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(schemas) != 2 || !schemas["fixed"].Equal(testSchema()) || schemas["events"].NumFields() != 0 {
		t.Fatalf("ListFlights schemas %v: want fixed's schema and an empty one for events", schemas)
	}

	info, err := s.client.GetFlightInfo(t.Context(), pathDesc("fixed"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := flight.DeserializeSchema(info.GetSchema(), s.mem); err != nil || !got.Equal(testSchema()) {
		t.Fatalf("GetFlightInfo schema %v, %v", got, err)
	}
	res, err := s.client.GetSchema(t.Context(), pathDesc("events"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := flight.DeserializeSchema(res.GetSchema(), s.mem); err != nil || got.NumFields() != 0 {
		t.Fatalf("GetSchema of a schema-less endpoint: %v, %v; want the empty schema", got, err)
	}

	raw, err := s.actionRaw(t.Context(), "endpoints", "{}")
	if err != nil {
		t.Fatal(err)
	}
	wantEndpoints := `[{"name":"events","sink":"discard","mode":""},{"name":"fixed","sink":"discard","mode":"","schema":[{"name":"id","type":"int64","nullable":false},{"name":"name","type":"utf8","nullable":true}]}]`
	if string(raw) != wantEndpoints {
		t.Fatalf("endpoints = %s\nwant %s", raw, wantEndpoints)
	}

	health := s.mustAction("health", "")
	if !reflect.DeepEqual(health, map[string]any{"status": "ok", "endpoints": map[string]any{"events": "ok", "fixed": "ok"}, "journal": "ok"}) {
		t.Fatalf("health = %v", health)
	}
}

// checkFails is a discard writer whose sink cannot be reached.
type checkFails struct{ *discard.Writer }

func (checkFails) Check(context.Context) error {
	return writers.Errorf(writers.ErrUnavailable, "test: storage unreachable")
}

func TestHealthDegraded(t *testing.T) {
	s := startServer(t, serverConfig{endpoints: map[string]writers.Writer{
		"events": discard.New(nil),
		"broken": checkFails{discard.New(nil)},
	}})
	got := s.svc.Health(t.Context())
	if len(got) != 2 || got["events"] != nil || !errors.Is(got["broken"], writers.ErrUnavailable) {
		t.Fatalf("Health = %v", got)
	}
	health := s.mustAction("health", "{}")
	want := map[string]any{"status": "degraded", "endpoints": map[string]any{"events": "ok", "broken": "test: storage unreachable"}, "journal": "ok"}
	if !reflect.DeepEqual(health, want) {
		t.Fatalf("health = %v, want %v", health, want)
	}
}
