package quiver_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	quiver "github.com/quiver-ingest/quiver/clients/go"
)

// orders returns a reader over one batch of n rows (id, amount).
func orders(n int) array.RecordReader {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Float64Builder).Append(float64(i) * 1.5)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	r, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		log.Fatal(err)
	}
	return r
}

// Put sends a reader as one auto-commit stream: every row lands in one
// commit, or none does.
func Example_put() {
	srv := startServer(serverConfig{}) // a Quiver server with a discard endpoint "devnull"
	defer srv.Stop()
	ctx := context.Background()

	c, err := quiver.Dial(srv.Addr) // add quiver.WithToken(...) when the server has auth
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	r := orders(1000)
	defer r.Release()
	ack, err := c.Put(ctx, "devnull", r)
	if err != nil {
		log.Fatal(err) // status.Code(err) tells InvalidArgument, NotFound, ...
	}
	fmt.Printf("committed=%v rows=%d\n", ack.Committed, ack.Rows)
	// Output: committed=true rows=1000
}

// A pipeline writes each checkpoint interval under (writer, epoch):
// stage, precommit at its checkpoint, commit once the checkpoint is
// durable. After a crash it replays the epoch, which changes nothing if
// the epoch had already committed.
func ExampleTxn() {
	srv := startServer(serverConfig{})
	defer srv.Stop()
	ctx := context.Background()
	c, err := quiver.Dial(srv.Addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	tx := c.Txn("orders-pipeline/p3", 42)
	r := orders(500)
	defer r.Release()
	staged, err := tx.Put(ctx, "devnull", r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("staged=%v rows=%d\n", staged.Staged, staged.Rows)

	pre, err := tx.Precommit(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d participant(s), %d rows\n", pre.State, len(pre.Participants), pre.Participants[0].Rows)

	res, err := tx.Commit(ctx, nil)
	if err != nil {
		log.Fatal(err) // codes.Unknown: reconcile with CommittedEpoch
	}
	fmt.Printf("%s replayed=%v\n", res.State, res.Replayed)

	// The replay after a crash: the same epoch again.
	again := c.Txn("orders-pipeline/p3", 42)
	r2 := orders(500)
	defer r2.Release()
	if _, err := again.Put(ctx, "devnull", r2); err != nil {
		log.Fatal(err)
	}
	res, err = again.Commit(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s replayed=%v\n", res.State, res.Replayed)
	// Output:
	// staged=true rows=500
	// precommitted: 1 participant(s), 500 rows
	// committed replayed=false
	// committed replayed=true
}

// After a commit whose outcome is unknown, ask the sink which epoch the
// writer last committed.
func ExampleClient_CommittedEpoch() {
	srv := startServer(serverConfig{})
	defer srv.Stop()
	ctx := context.Background()
	c, err := quiver.Dial(srv.Addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	epoch, ok, err := c.CommittedEpoch(ctx, "devnull", "orders-pipeline/p3")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(epoch, ok)
	// Output: 0 false
}

// A collector writes batches as they come through a continuous stream:
// the server commits them every commit interval, and after a reconnection
// the Stream resends only what was not durable, so each lands once.
func ExampleClient_Stream() {
	dir, err := os.MkdirTemp("", "quiver-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv := startStreamServer(dir, memory.DefaultAllocator) // a Delta endpoint "events" taking streams
	defer srv.Shutdown(context.Background())
	ctx := context.Background()
	c, err := quiver.Dial(srv.FlightAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	r := orders(100)
	defer r.Release()
	// With the schema the stream opens at once: Durable tells where the
	// writer stands (-1: nothing yet), so a restarted collector knows
	// where its source resumes.
	s, err := c.Stream(ctx, "events", "collector-7", quiver.WithStreamSchema(r.Schema()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("durable before:", s.Durable())
	for r.Next() {
		for range 3 {
			seq, err := s.Write(ctx, r.RecordBatch()) // queued; the Stream keeps it until durable
			if err != nil {
				log.Fatal(err) // final: Aborted (fenced), InvalidArgument, FailedPrecondition
			}
			fmt.Println("wrote seq", seq)
		}
	}
	if err := s.Close(ctx); err != nil { // waits until every batch is durable
		log.Fatal(err)
	}
	fmt.Println("durable after:", s.Durable())
	// Output:
	// durable before: -1
	// wrote seq 0
	// wrote seq 1
	// wrote seq 2
	// durable after: 2
}
