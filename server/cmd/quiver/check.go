package main

import (
	"context"
	"errors"
	"io"
)

// PLACEHOLDER: replaced by the implementation.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("check: not built yet")
}
