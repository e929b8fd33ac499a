package flightsvc

import (
	"fmt"
	"testing"

	"github.com/quiver-ingest/quiver/internal/membudget"
)

// A client whose last stream closed while its receiver still held bytes is
// kept (its quota must not restart from zero); once it holds nothing, later
// opens of other clients forget it, so that peer hosts do not pile up.
func TestClientsForgetIdleKeptClients(t *testing.T) {
	budget := smallBudget(t)
	cs := &clients{budget: budget, maxStreams: 8, memory: 1 << 20, m: map[string]*client{}}
	share := budget.Share("events", 0)
	var held []*client
	for i := range 50 {
		c, err := cs.open(fmt.Sprint("peer 10.0.0.", i))
		if err != nil {
			t.Fatal(err)
		}
		share.Account(c.quota).Charge(membudget.Received, 10) // a receiver outliving its handler
		cs.close(c)
		held = append(held, c)
	}
	if n := len(cs.m); n != 50 {
		t.Fatalf("%d clients kept, want the 50 that still hold bytes", n)
	}
	for _, c := range held {
		share.Account(c.quota).Release(membudget.Received, 10)
	}
	for i := range 1000 {
		c, err := cs.open(fmt.Sprint("peer 10.0.1.", i%2))
		if err != nil {
			t.Fatal(err)
		}
		cs.close(c)
	}
	if n := len(cs.m); n != 0 {
		t.Fatalf("%d idle clients still kept after 1,000 opens", n)
	}
}
