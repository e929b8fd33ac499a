package writers

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of an endpoint's stream section.
const (
	DefaultCommitInterval = time.Second
	DefaultCommitBytes    = 128 << 20
)

// Limits of an endpoint's stream section: a shorter interval makes one
// table version per interval faster than storage commits, a smaller group
// one data file per few rows.
const (
	MinCommitInterval = 10 * time.Millisecond
	MaxCommitInterval = time.Hour
	MinCommitBytes    = 1 << 20
)

// GroupCommit is an endpoint's stream section: the rows of its
// continuous streams are published by one group commit every
// CommitInterval or as soon as CommitBytes are staged, whichever comes
// first (package flightsvc/groupcommit).
type GroupCommit struct {
	CommitInterval time.Duration `yaml:"commit_interval"`
	CommitBytes    int64         `yaml:"commit_bytes"`
}

// NewGroupCommit is the stream section of an endpoint that has none.
func NewGroupCommit() GroupCommit {
	return GroupCommit{CommitInterval: DefaultCommitInterval, CommitBytes: DefaultCommitBytes}
}

// Validate names each setting out of its range, one per line as
// "key: problem".
func (c GroupCommit) Validate() error {
	var errs []error
	if c.CommitInterval < MinCommitInterval || c.CommitInterval > MaxCommitInterval {
		errs = append(errs, fmt.Errorf("commit_interval: %s is out of range: use %s to %s", c.CommitInterval, MinCommitInterval, MaxCommitInterval))
	}
	if c.CommitBytes < MinCommitBytes {
		errs = append(errs, fmt.Errorf("commit_bytes: %d is below the minimum of %d (1MiB)", c.CommitBytes, MinCommitBytes))
	}
	return errors.Join(errs...)
}
