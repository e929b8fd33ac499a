package main

import (
	"context"
	"errors"
	"io"
)

// PLACEHOLDER: replaced by the implementation.
func runAction(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("action: not built yet")
}
