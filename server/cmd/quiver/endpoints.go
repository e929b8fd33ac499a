package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	quiver "github.com/quiver-ingest/quiver/clients/go"
	"github.com/quiver-ingest/quiver/clients/go/quiverflag"
)

// runEndpoints lists the server's endpoints (those the token may use): a
// table of name, sink, mode and schema, or the endpoints action's JSON
// with --json.
func runEndpoints(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("endpoints", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := quiverflag.Register(fs, quiverflag.DefaultAddr)
	asJSON := fs.Bool("json", false, "print the endpoints action's JSON result instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{errors.New("unexpected arguments: " + fs.Arg(0))}
	}
	c, err := conn.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if *asJSON {
		res, err := c.Action(ctx, "endpoints", nil)
		if err != nil {
			return err
		}
		return writeJSON(stdout, res, true)
	}
	eps, err := c.Endpoints(ctx)
	if err != nil {
		return err
	}
	return writeEndpointTable(stdout, eps)
}

// writeEndpointTable prints one row per endpoint; "-" marks no mode, and
// "(none yet)" an endpoint whose first stream will define the schema.
func writeEndpointTable(w io.Writer, eps []quiver.EndpointInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSINK\tMODE\tSCHEMA")
	for _, e := range eps {
		mode := e.Mode
		if mode == "" {
			mode = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.Sink, mode, schemaText(e.Schema))
	}
	return tw.Flush()
}

// schemaText formats fields as "id int64, name utf8?" (? marks nullable).
func schemaText(fields []quiver.Field) string {
	if len(fields) == 0 {
		return "(none yet)"
	}
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f.Name + " " + f.Type
		if f.Nullable {
			parts[i] += "?"
		}
	}
	return strings.Join(parts, ", ")
}
