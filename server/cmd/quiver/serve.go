package main

import (
	"context"
	"errors"
	"io"
)

// PLACEHOLDER: replaced by the implementation.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("serve: not built yet")
}
