package txn

import (
	"testing"
	"time"
)

// TestFenceWaitsForTheFencedAttemptsRollback: a begin fences an attempt
// whose streams are still writing on endpoints a and b; the last of
// them to end rolls the endpoints back (Stream.Done → discardParts), one
// after the other. fence returns as soon as no stream is left and
// t.discard is empty, which it is as soon as that Done took the list,
// not when the rollbacks are done. While the rollback of a is slow (S3
// deleting many staged files), the new attempt begins and writes to b;
// then the old attempt's Rollback of b, for the same TxnKey (keys carry
// no attempt), discards the new attempt's staged rows: in a real sink,
// Stages.Rollback takes the new stage and deletes its files, racing its
// Write. The new attempt's rows on b are lost without an error.
func TestFenceWaitsForTheFencedAttemptsRollback(t *testing.T) {
	fx := newFixture(t, "a", "b")
	old := WithConn(bg, "old:1")
	s1, err := fx.c.Join(old, "q", 7, "a")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := fx.c.Join(old, "q", 7, "b")
	if err != nil {
		t.Fatal(err)
	}
	a, b := fx.eps["a"], fx.eps["b"]
	a.mu.Lock() // a's Rollback is slow
	begun := make(chan Status, 1)
	go func() {
		st, err := fx.c.Begin(WithConn(bg, "new:2"), "q", 7, 0)
		if err != nil {
			t.Error(err)
		}
		begun <- st
	}()
	time.Sleep(50 * time.Millisecond) // the begin fences and waits for the streams
	s1.Done(1, nil)
	go s2.Done(1, nil) // the last stream: rolls a back (blocked), then b
	var st Status
	locked := true
	select {
	case st = <-begun:
	case <-time.After(time.Second):
		// The begin waits for the fenced attempt's rollbacks: as it must.
		a.mu.Unlock()
		locked = false
		st = <-begun
	}
	// The new attempt writes to b while the old one's rollback of a runs.
	s3, err := fx.c.Join(WithAttempt(WithConn(bg, "new:2"), st.Attempt), "q", 7, "b")
	if err != nil {
		if locked {
			a.mu.Unlock()
		}
		t.Fatal(err)
	}
	s3.Done(7, nil)
	b.mu.Lock()
	before := len(b.rollbacks)
	b.mu.Unlock()
	if locked {
		a.mu.Unlock()
	}
	time.Sleep(100 * time.Millisecond)
	b.mu.Lock()
	after := len(b.rollbacks)
	b.mu.Unlock()
	if after > before {
		t.Fatalf("endpoint b was rolled back for q@7 after the new attempt %s staged 7 rows there: the fenced attempt's late rollback discards them", st.Attempt)
	}
}
