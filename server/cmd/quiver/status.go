package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quiver-ingest/quiver/server/status"
)

// maxStatusBytes bounds the /api/status answer read (a few KiB per
// endpoint).
const maxStatusBytes = 64 << 20

// runStatus prints the server's status page in the terminal: a table, or
// /api/status's JSON with --json; --watch redraws it until interrupted.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "127.0.0.1:9815", "the server's http_listen address host:port")
	token := fs.String("token", os.Getenv("QUIVER_TOKEN"), "bearer token, when the server has auth (default $QUIVER_TOKEN)")
	asJSON := fs.Bool("json", false, "print /api/status's JSON instead of a table")
	watch := fs.Bool("watch", false, "redraw every --interval until interrupted")
	every := fs.Duration("interval", 2*time.Second, "refresh interval of --watch")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{errors.New("unexpected arguments: " + fs.Arg(0))}
	}
	if *every <= 0 {
		return usageError{errors.New("--interval must be positive")}
	}
	url := "http://" + *addr + "/api/status"
	for {
		raw, err := fetchStatus(ctx, url, *token)
		if err != nil {
			if *watch && ctx.Err() != nil {
				return nil // interrupted while watching: done
			}
			return err
		}
		if *watch {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear screen
		}
		if *asJSON {
			_, err = stdout.Write(raw)
		} else {
			var st status.Status
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("%s: %w", url, err)
			}
			err = writeStatus(stdout, st)
		}
		if err != nil || !*watch {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*every):
		}
	}
}

// fetchStatus GETs /api/status.
func fetchStatus(ctx context.Context, url, token string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w (is the server's http_listen %s? set --http)", err, req.URL.Host)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// writeStatus prints st as the status page shows it.
func writeStatus(w io.Writer, st status.Status) error {
	m := st.Memory
	budget := ""
	if m.BudgetBytes > 0 {
		budget = fmt.Sprintf("; budget %s of %s", bytesText(m.ChargedBytes), bytesText(m.BudgetBytes))
	}
	fmt.Fprintf(w, "quiver %s  %s  up %s  flight %s  journal %s\n", st.Version, st.State,
		time.Duration(st.UptimeSeconds*float64(time.Second)).Round(time.Second), st.Flight, st.Journal)
	fmt.Fprintf(w, "memory %s process, %s heap, %s buffered%s\n\n", bytesText(int64(m.ProcessBytes)), bytesText(int64(m.HeapBytes)), bytesText(m.BufferedBytes), budget)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tSINK\tMODE\tSTATE\tSTREAMS\tROWS\tROWS/S\tMB/S\tLAST COMMIT\tERRORS 1H\tTARGET")
	var reasons []string
	for _, e := range st.Endpoints {
		var rps, mbps float64
		if n := len(e.Throughput); n > 0 {
			rps, mbps = e.Throughput[n-1].RowsPerSec, e.Throughput[n-1].BytesPerSec/1e6
		}
		last := "-"
		if len(e.Commits) > 0 {
			c := e.Commits[0]
			last = fmt.Sprintf("%d rows %s ago", c.Rows, st.Now.Sub(c.At).Round(time.Second))
			if c.Version >= 0 {
				last = fmt.Sprintf("v%d, %s", c.Version, last)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.1f\t%.2f\t%s\t%d\t%s\n", e.Name, e.Sink, orDash(e.Mode), e.State, e.Streams, e.Rows, rps, mbps, last, e.ErrorsHour, orDash(e.Target))
		if e.Reason != "" {
			reasons = append(reasons, fmt.Sprintf("%s: %s", e.Name, e.Reason))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range reasons {
		fmt.Fprintf(w, "  degraded %s\n", r)
	}
	if len(st.Transactions) == 0 {
		_, err := fmt.Fprintln(w, "\nno open or precommitted transaction")
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WRITER\tEPOCH\tSTATE\tAGE\tENDPOINTS\tROWS")
	for _, t := range st.Transactions {
		state := t.State
		if t.Stuck {
			state += " (STUCK)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\n", t.Writer, t.Epoch, state, time.Duration(t.AgeSecs*float64(time.Second)).Round(time.Second), strings.Join(t.Endpoints, ","), t.Rows)
	}
	return tw.Flush()
}

// orDash keeps table columns aligned for empty values.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// bytesText is n in binary units.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
