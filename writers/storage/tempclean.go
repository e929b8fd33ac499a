package storage

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// StaleTempAge is how old a temporary file must be before RemoveStaleTemps
// takes it for a crashed write's: far longer than any write keeps one
// open, so a live writer's (another process sharing the root) is never
// removed.
const StaleTempAge = time.Hour

// RemoveStaleTemps deletes the temporary files (".<name>.quiver-tmp-…") of
// file:// writes that a crashed or killed process left under the root and
// that were last modified more than olderThan ago, and returns how many it
// removed. Object stores have none: their uploads appear whole or not at
// all. Sinks call it when they open.
func (b *Bucket) RemoveStaleTemps(ctx context.Context, olderThan time.Duration) (int, error) {
	if !b.Local() {
		return 0, nil
	}
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	err := filepath.WalkDir(b.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !isTempName(d.Name()) {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.ModTime().After(cutoff) {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed++
		return nil
	})
	if err != nil {
		return removed, b.wrap("remove-stale-temps", "", err)
	}
	return removed, nil
}

// CleanUp runs RemoveStaleTemps with StaleTempAge for a sink opening its
// root and logs the outcome. A failure is only logged: it leaves garbage
// behind, never wrong data.
func (b *Bucket) CleanUp(ctx context.Context, log *slog.Logger) {
	n, err := b.RemoveStaleTemps(ctx, StaleTempAge)
	switch {
	case err != nil:
		log.Warn("cannot remove the temporary files of crashed writes", "root", b.uri, "err", err)
	case n > 0:
		log.Info("removed the temporary files of crashed writes", "root", b.uri, "files", n)
	}
}
