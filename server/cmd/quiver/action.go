package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/quiver-ingest/quiver/clients/go/quiverflag"
)

// runAction runs one DoAction and prints its JSON result, indented, on
// stdout. The body defaults to {}.
func runAction(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("action", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := quiverflag.Register(fs, quiverflag.DefaultAddr)
	compact := fs.Bool("compact", false, "print the result on one line")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: quiver action [flags] NAME [JSON]")
		fmt.Fprintln(stderr, "NAME: begin, precommit, commit, rollback, status, committed-epoch, endpoints, health, optimize, vacuum")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return usageError{errors.New("give the action NAME and at most one JSON body")}
	}
	body := json.RawMessage("{}")
	if fs.NArg() == 2 {
		body = json.RawMessage(fs.Arg(1))
		if !json.Valid(body) {
			return usageError{fmt.Errorf("the body %q is not valid JSON (quote it for the shell: '{\"writer\":\"w\",\"epoch\":1}')", fs.Arg(1))}
		}
	}
	c, err := conn.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Action(ctx, fs.Arg(0), body)
	if err != nil {
		return err
	}
	return writeJSON(stdout, res, !*compact)
}

// writeJSON prints one JSON document and a newline, indented if asked.
func writeJSON(w io.Writer, doc json.RawMessage, indent bool) error {
	var buf bytes.Buffer
	var err error
	if indent {
		err = json.Indent(&buf, doc, "", "  ")
	} else {
		err = json.Compact(&buf, doc)
	}
	if err != nil {
		return fmt.Errorf("the server answered invalid JSON %q: %w", doc, err)
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}
