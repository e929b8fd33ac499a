package storage

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"iter"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
)

// List yields the objects under prefix (recursively), in lexical (byte)
// key order, starting after startAfter when it is non-empty. It stops at
// the first error, which it yields with a zero Object. Directories are not
// objects, and neither are the temporary files of file:// writes in flight
// (or stranded by a crash); everything else is listed.
//
// Cloud stores list in key order natively, and S3 is also told startAfter
// so that a _delta_log listing starts at the right version. file:// walks
// the directory once and sorts (see listLocal).
func (b *Bucket) List(ctx context.Context, prefix, startAfter string) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		if err := checkPrefix(prefix); err != nil {
			yield(Object{}, b.wrap("list", prefix, err))
			return
		}
		if b.Local() {
			objs, err := b.listLocal(ctx, prefix, startAfter)
			if err != nil {
				yield(Object{}, b.wrap("list", prefix, err))
				return
			}
			for _, o := range objs {
				if !yield(o, nil) {
					return
				}
			}
			return
		}
		it := b.blob.List(&blob.ListOptions{Prefix: prefix, BeforeList: b.s3StartAfter(startAfter)})
		for {
			// Drivers serving pages from memory (memblob) never look at ctx.
			if err := ctx.Err(); err != nil {
				yield(Object{}, b.wrap("list", prefix, err))
				return
			}
			o, err := it.Next(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(Object{}, b.wrap("list", prefix, err))
				return
			}
			if o.IsDir || o.Key <= startAfter {
				continue
			}
			if !yield(Object{Key: o.Key, Size: o.Size, ModTime: o.ModTime}, nil) {
				return
			}
		}
	}
}

// listLocal lists a file:// root: the regular files under prefix with keys
// after startAfter, sorted. It walks once, from the deepest directory the
// prefix names, skipping directories that cannot match. fileblob's listing
// is not used: it restarts its walk for every page of 1000 objects, opens a
// ".attrs" file per object, and yields directory-walk order, in which the
// file "a-b" comes after "a/x" although it sorts before it.
func (b *Bucket) listLocal(ctx context.Context, prefix, startAfter string) ([]Object, error) {
	root := b.dir
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		root = b.path(prefix[:i])
	}
	var objs []Object
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if path == root {
					return fs.SkipAll // nothing under a prefix that does not exist
				}
				return nil // removed while the walk ran (a concurrent writer's temp file or directory)
			}
			return err // an unreadable directory must not look empty
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(b.dir, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if path != root && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) || key <= startAfter || isTempName(d.Name()) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since the directory was read
		}
		if err != nil {
			return err
		}
		objs = append(objs, Object{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(objs, func(x, y Object) int { return strings.Compare(x.Key, y.Key) })
	return objs, nil
}

// s3StartAfter passes startAfter to S3's ListObjectsV2 so that a listing of
// a long log starts where asked instead of at its first key. Other drivers
// ignore it (List filters client-side anyway). The key S3 sees carries the
// root prefix.
func (b *Bucket) s3StartAfter(startAfter string) func(func(any) bool) error {
	if startAfter == "" {
		return nil
	}
	return func(as func(any) bool) error {
		var in *s3.ListObjectsV2Input
		if as(&in) && (in.ContinuationToken == nil || *in.ContinuationToken == "") {
			in.StartAfter = aws.String(b.prefix + startAfter)
		}
		return nil
	}
}
