package main

import (
	"context"
	"errors"
	"io"
)

// PLACEHOLDER: replaced by the implementation.
func runEndpoints(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("endpoints: not built yet")
}
