package server

import (
	"io"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiver-ingest/quiver/server/config"
)

// TestKnownActionsMatchService keeps the config's list of grantable actions
// equal to what the Flight service offers.
func TestKnownActionsMatchService(t *testing.T) {
	s := startServer(t, twoEndpoints)
	client := flight.NewFlightServiceClient(dial(t, s.FlightAddr()))
	stream, err := client.ListActions(t.Context(), &flight.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	for {
		a, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		offered = append(offered, a.Type)
	}
	want := slices.Sorted(slices.Values(config.KnownActions))
	slices.Sort(offered)
	if !slices.Equal(offered, want) {
		t.Fatalf("service offers %v, config grants %v", offered, want)
	}
}
