package txn

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLive: Live lists the open and precommitted transactions oldest
// first, each since its begin or, once precommitted, its precommit (journal
// time, so a restart keeps it); the oldest-precommitted and by-state gauges
// follow.
func TestLive(t *testing.T) {
	fx := newFixture(t)
	t0 := fx.clock.Now()
	if _, err := fx.c.Begin(bg, "job", 1, 0); err != nil {
		t.Fatal(err)
	}
	fx.write("job", 1, "a", 4)
	fx.clock.Advance(10 * time.Second)
	if _, err := fx.c.Begin(bg, "other", 2, 0); err != nil {
		t.Fatal(err)
	}
	fx.clock.Advance(10 * time.Second)
	if _, err := fx.c.Precommit(bg, "job", 1); err != nil {
		t.Fatal(err)
	}
	fx.clock.Advance(15 * time.Second)
	check := func(when string) {
		t.Helper()
		live := fx.c.Live()
		if len(live) != 2 || live[0].Writer != "other" || !live[0].Since.Equal(t0.Add(10*time.Second)) || live[0].State != StateOpen ||
			live[1].Writer != "job" || !live[1].Since.Equal(t0.Add(20*time.Second)) || live[1].State != StatePrecommitted || live[1].Participants[0].Rows != 4 {
			t.Fatalf("%s: live = %+v", when, live)
		}
		if d := fx.c.oldestPrecommitted(); d != 15*time.Second {
			t.Errorf("%s: oldest precommitted %s, want 15s", when, d)
		}
		reg := prometheus.NewRegistry()
		m, err := newMetrics(reg, fx.c)
		if err != nil {
			t.Fatal(err)
		}
		defer m.unregister()
		got := gatherCounters(t, reg)
		if got["quiver_transactions_live/open"] != 1 || got["quiver_transactions_live/precommitted"] != 1 || got["quiver_transactions_oldest_precommitted_seconds"] != 15 {
			t.Errorf("%s: metrics %v", when, got)
		}
	}
	check("running")
	fx.restart() // open transactions are aborted by a restart; begin "other" again
	if _, err := fx.c.Begin(bg, "other", 2, 0); err != nil {
		t.Fatal(err)
	}
	live := fx.c.Live()
	if len(live) != 2 || live[0].Writer != "job" || !live[0].Since.Equal(t0.Add(20*time.Second)) || !live[1].Since.Equal(fx.clock.Now()) {
		t.Fatalf("after a restart: %+v", live)
	}
}
