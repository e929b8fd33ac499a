package main

import (
	"context"
	"errors"
	"io"
)

// PLACEHOLDER: replaced by the implementation.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("bench: not built yet")
}
