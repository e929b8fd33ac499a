package main

import (
	"context"
	"errors"
	"io"
)

// PLACEHOLDER: replaced by the implementation.
func runPut(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("put: not built yet")
}
