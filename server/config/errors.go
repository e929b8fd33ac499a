package config

import (
	"fmt"
	"strings"

	"github.com/quiver-ingest/quiver/writers"
)

// Problem is one thing wrong with a config.
type Problem struct {
	// Line is the 1-based line in the file, 0 when unknown (a missing key).
	Line int
	// Path is the YAML path of the offending value ("endpoints[1].name"),
	// "" for the document itself.
	Path string
	Msg  string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error reports every problem found in a config file. It wraps
// writers.ErrInvalid.
type Error struct {
	// File is the config file's path ("" when parsed from memory).
	File     string
	Problems []Problem
}

func (e *Error) Error() string {
	prefix := "config"
	if e.File != "" {
		prefix = "config " + e.File
	}
	if len(e.Problems) == 1 {
		return prefix + ": " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems:", prefix, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return writers.ErrInvalid }
