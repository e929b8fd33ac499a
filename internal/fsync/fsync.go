// Package fsync makes file-system changes durable. It imports only the
// standard library, so that every package writing local files (the
// journal, the local object store, the Kafka staging files, the
// descriptor key) shares one definition.
package fsync

import (
	"errors"
	"os"
)

// Dir fsyncs directory dir, so that entries created, renamed or removed
// in it survive a crash.
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
