package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/clients/go/quiverflag"
	"github.com/quiver-ingest/quiver/internal/redact"
)

// stdin is where quiver stream reads; tests replace it.
var stdin io.Reader = os.Stdin

// streamCloseGrace bounds the Close that commits what was written after
// the input failed or the command was interrupted.
const streamCloseGrace = 30 * time.Second

// streamSummary is what quiver stream prints at the end.
type streamSummary struct {
	Rows    int64 `json:"rows"`
	Batches int64 `json:"batches"`
	// DurableSeq is the writer's durable seq, nil when it has none.
	DurableSeq *int64 `json:"durable_seq"`
	// Version is the table version of the stream's last commit, for sinks
	// with versions.
	Version *int64 `json:"version,omitempty"`
}

// runStream sends the Arrow IPC stream read from stdin through a
// continuous stream of (endpoint, writer), closes it at EOF and prints a
// one-line JSON summary.
func runStream(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := quiverflag.Register(fs, quiverflag.DefaultAddr)
	endpoint := fs.String("endpoint", "", "endpoint to send to (required)")
	writer := fs.String("writer", "", "stream writer: the name seqs and resumption are kept under (required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: producer | quiver stream [flags] --endpoint E --writer W")
		fmt.Fprintln(stderr, "Reads an Arrow IPC stream from stdin and writes each batch through a continuous stream until EOF.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *endpoint == "" || *writer == "":
		return usageError{errors.New("--endpoint and --writer are required")}
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected argument %q: the input comes from stdin", fs.Arg(0))}
	}

	rdr, err := ipc.NewReader(stdin, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return fmt.Errorf("stdin: not an Arrow IPC stream: %w", err)
	}
	defer rdr.Release()
	c, err := conn.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	reconnecting := quiver.WithOnReconnect(func(err error, pause time.Duration) {
		fmt.Fprintf(stderr, "quiver stream: %s; reconnecting in %s\n", redact.Text(err.Error()), pause.Round(time.Millisecond))
	})
	// Opening with the schema tells the writer's durable seq even for an
	// input without batches.
	s, err := c.Stream(ctx, *endpoint, *writer, quiver.WithStreamSchema(rdr.Schema()), reconnecting)
	if err != nil {
		return err
	}

	var sum streamSummary
	writeErr := func() error {
		for rdr.Next() {
			rec := rdr.RecordBatch()
			if _, err := s.Write(ctx, rec); err != nil {
				return err
			}
			sum.Rows += rec.NumRows()
			sum.Batches++
		}
		if err := rdr.Err(); err != nil {
			return fmt.Errorf("stdin: %w", err)
		}
		return nil
	}()
	// What was written is committed even when the input failed or the
	// command was interrupted: each batch stands alone.
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), streamCloseGrace)
	defer cancel()
	closeErr := s.Close(closeCtx)
	if closeErr == writeErr {
		closeErr = nil // the stream's final error, which Write returned already
	}
	if err := errors.Join(writeErr, closeErr); err != nil {
		return fmt.Errorf("%w (writer %q: durable seq %d after %d batches written)", err, *writer, s.Durable(), sum.Batches)
	}
	if d := s.Durable(); d >= 0 {
		sum.DurableSeq = &d
	}
	if v, ok := s.Version(); ok {
		sum.Version = &v
	}
	return json.NewEncoder(stdout).Encode(sum)
}
