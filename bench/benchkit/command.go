package benchkit

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is the tail of a sink benchmark's main, once its flags are parsed
// and checked: it calls run with a context cancelled on SIGINT or SIGTERM
// (so an interrupted benchmark still stops its server and removes its
// files), and on error prints "name: err" to stderr and exits with status
// 1. It returns only when run succeeds.
func Run(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// UsageError prints "name: err" to stderr and exits with status 2, the
// status of a bad flag.
func UsageError(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(2)
}

// TempDir makes a temporary folder named after the command for its
// tables and journal. With keep it prints "name: what in dir" to log and
// remove does nothing, so the folder outlives the run; otherwise remove
// deletes it. Call remove once the server using the folder has stopped.
func TempDir(name, what string, keep bool, log io.Writer) (dir string, remove func(), err error) {
	dir, err = os.MkdirTemp("", name+"-")
	if err != nil {
		return "", nil, err
	}
	if keep {
		fmt.Fprintf(log, "%s: %s in %s\n", name, what, dir)
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
