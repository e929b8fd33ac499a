// Command quiver is the Quiver server and its command-line client.
//
// Commands (docs/cli.md): serve, check, endpoints, put, stream, action,
// status, bench, version. Results go to stdout (JSON where it is data), errors to stderr
// with a non-zero exit status.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/quiver-ingest/quiver/internal/redact"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand: it parses args and runs until ctx ends.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"serve":     {"run the server until SIGINT/SIGTERM", runServe},
		"check":     {"validate the config and probe every endpoint's sink", runCheck},
		"endpoints": {"list the server's endpoints", runEndpoints},
		"put":       {"send Arrow IPC or Parquet files to an endpoint", runPut},
		"stream":    {"send an Arrow IPC stream from stdin through a continuous stream", runStream},
		"action":    {"run a DoAction and print its JSON result", runAction},
		"status":    {"show the server's status page in the terminal", runStatus},
		"bench":     {"run the benchmark harness (same flags as quiverbench)", runBench},
		"version":   {"print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "quiver: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "quiver %s: %s\n", args[0], redact.Text(err.Error()))
			return 2
		}
		fmt.Fprintf(stderr, "quiver %s: %s\n", args[0], redact.Text(err.Error()))
		return 1
	}
	return 0
}

// usageError marks a bad command line (exit status 2).
type usageError struct{ error }

// parseFlags parses a command's args into fs: -h is flag.ErrHelp, any
// other problem a usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	return nil
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: quiver <command> [flags]")
	fmt.Fprintln(w)
	for _, name := range []string{"serve", "check", "endpoints", "put", "stream", "action", "status", "bench", "version"} {
		fmt.Fprintf(w, "  %-10s %s\n", name, cmds[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'quiver <command> -h' for a command's flags.")
}

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) error {
	_, err := fmt.Fprintf(stdout, "quiver %s\n", version)
	return err
}
