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

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/clients/go/quiverflag"
)

// progressMinRows is the input size from which put shows a progress bar
// (on a terminal only): below it the put is over before a bar helps.
const progressMinRows = 4 * parquetBatchRows

// runPut sends Arrow IPC (file or stream) and Parquet files to an endpoint
// as one stream and prints the final ack as JSON on stdout. Without
// --writer it is one auto-commit stream; with --writer and --epoch the
// rows join that transaction and a hint for the next step goes to stderr.
func runPut(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("put", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := quiverflag.Register(fs, quiverflag.DefaultAddr)
	endpoint := fs.String("endpoint", "", "endpoint to send to (required)")
	writer := fs.String("writer", "", "transaction writer; with --epoch, stage the rows in transaction (writer, epoch)")
	epoch := fs.Int64("epoch", -1, "transaction epoch (with --writer)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: quiver put [flags] --endpoint E [--writer W --epoch N] FILE...")
		fmt.Fprintln(stderr, "FILEs are Arrow IPC files or streams, or Parquet, told apart by their magic bytes; they must share one schema.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *endpoint == "":
		return usageError{errors.New("--endpoint is required")}
	case fs.NArg() == 0:
		return usageError{errors.New("give at least one FILE")}
	case (*writer == "") != (*epoch < 0):
		return usageError{errors.New("--writer and --epoch go together (epoch >= 0)")}
	}

	bar := newProgress(stderr)
	files, err := openInputs(ctx, fs.Args(), memory.DefaultAllocator, bar != nil)
	if err != nil {
		return err
	}
	defer files.close()
	c, err := conn.Dial()
	if err != nil {
		return err
	}
	defer c.Close()

	var opts []quiver.PutOption
	if rows := files.rows(); bar != nil && (rows < 0 || rows >= progressMinRows) {
		opts = append(opts, quiver.WithTrace(bar.start(rows)))
	}
	enc := json.NewEncoder(stdout)
	if *writer == "" {
		ack, err := c.Put(ctx, *endpoint, files, opts...)
		bar.finish()
		if err != nil {
			return err
		}
		return enc.Encode(ack)
	}
	ack, err := c.Txn(*writer, *epoch).Put(ctx, *endpoint, files, opts...)
	bar.finish()
	if err != nil {
		return err
	}
	if err := enc.Encode(ack); err != nil {
		return err
	}
	key, err := json.Marshal(struct {
		Writer string `json:"writer"`
		Epoch  int64  `json:"epoch"`
	}{*writer, *epoch})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stderr, "next: quiver action precommit '%s'   (then: quiver action commit '%s')\n", key, key)
	return err
}

// progress is a rows bar on a terminal's stderr.
type progress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

// newProgress returns a progress bar writing to stderr, or nil when stderr
// is not a terminal.
func newProgress(stderr io.Writer) *progress {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &progress{w: stderr}
}

// start shows the bar for total rows (-1: unknown, a spinner) and returns
// the trace that advances it on every batch ack.
func (p *progress) start(total int64) quiver.PutTrace {
	p.bar = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription("rows acknowledged"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("rows"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	return quiver.PutTrace{BatchAck: func(a quiver.BatchAck) { _ = p.bar.Add64(a.Rows) }}
}

// finish clears the bar, if one was shown, before results are printed.
// It is safe on a nil progress.
func (p *progress) finish() {
	if p != nil && p.bar != nil {
		_ = p.bar.Finish()
	}
}
