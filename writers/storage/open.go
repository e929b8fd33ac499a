package storage

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // registers azblob://
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob" // registers gs://
	"gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob" // registers s3://

	"github.com/quiver-ingest/quiver/writers"
)

// Open opens the table root uri:
//
//   - file:///abs/dir or file://rel/dir (also file://./rel/dir): a
//     directory, created if missing. A relative path resolves against
//     opts.BaseDir. The path is taken literally (no %-decoding) and no
//     query parameter is accepted.
//   - mem://name/prefix: in-process memory for tests. Every Open in the
//     process with the same name reaches the same objects (so two writers
//     of one test can race on one table); the data lives until the process
//     exits, so tests use names of their own (t.Name()).
//   - s3://bucket/prefix?region=..&endpoint=http://host:9000&use_path_style=true,
//     gs://bucket/prefix, azblob://container/prefix: the gocloud drivers;
//     query parameters are theirs (s3blob: region, endpoint, use_path_style
//     or s3ForcePathStyle, disable_https, anonymous, profile, ...; see
//     gocloud.dev/aws.V2ConfigFromURLParams). Credentials come from the
//     usual environment of each cloud.
//
// ctx is used for opening only. A malformed or unsupported URI fails with
// writers.ErrInvalid. On s3, gs and azblob Open lists one object to check
// the bucket: a missing bucket fails with ErrNoBucket, refused credentials
// with writers.ErrPermissionDenied or ErrUnauthenticated.
func Open(ctx context.Context, uri string, opts Options) (*Bucket, error) {
	r, err := resolve(uri, opts)
	if err != nil {
		return nil, &Error{Op: "open", URI: uri, Class: writers.ErrInvalid, Err: err}
	}
	b := &Bucket{uri: r.uri, dir: r.dir, prefix: r.prefix}
	switch r.scheme {
	case fileblob.Scheme:
		// file:// needs no gocloud bucket: every operation works on the
		// files directly (see the package comment). The root is not
		// created here, so that opening one to probe it (quiver check)
		// leaves nothing behind; the first write creates it.
		if fi, serr := os.Stat(r.dir); serr == nil && !fi.IsDir() {
			return nil, &Error{Op: "open", URI: r.uri, Class: writers.ErrInvalid, Err: fmt.Errorf("%s is not a directory", r.dir)}
		}
		return b, nil
	case memblob.Scheme:
		b.blob = memBucket(r.bucket)
	default:
		b.blob, err = blob.OpenBucket(ctx, r.bucketURL)
		if err == nil {
			err = b.checkAccessible(ctx)
		}
	}
	if err != nil {
		return nil, b.wrap("open", "", err)
	}
	if r.prefix != "" {
		b.blob = blob.PrefixedBucket(b.blob, r.prefix)
	}
	return b, nil
}

// checkAccessible asks the store whether the bucket exists, so that a
// misspelt bucket or refused credentials fail Open with a clear error
// instead of failing every later read as a missing object. It closes
// b.blob when it fails.
func (b *Bucket) checkAccessible(ctx context.Context) error {
	ok, err := b.blob.IsAccessible(ctx)
	if err == nil && !ok {
		err = ErrNoBucket // the message names the root, hence the bucket
	}
	if err != nil {
		_ = b.blob.Close()
	}
	return err
}

// resolved is a parsed root URI.
type resolved struct {
	scheme    string
	uri       string // canonical root URI (file:// absolute, query kept)
	dir       string // file: absolute directory
	bucket    string // mem and cloud: bucket / container name
	bucketURL string // cloud: URL of the bucket for blob.OpenBucket (query kept)
	prefix    string // mem and cloud: "" or "a/b/"
}

// Location names the storage location of root uri without touching
// storage: equal for two spellings of one location (a relative file path,
// a trailing slash, the store's query parameters such as a region).
func Location(uri string, opts Options) (string, error) {
	r, err := resolve(uri, opts)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(r.uri)
	if err != nil {
		return "", err
	}
	u.RawQuery = ""
	return u.String(), nil
}

// resolve parses uri without touching storage.
func resolve(uri string, opts Options) (resolved, error) {
	if rest, ok := strings.CutPrefix(uri, "file://"); ok {
		return resolveFile(rest, opts)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return resolved{}, fmt.Errorf("parse URI: %w", err)
	}
	switch u.Scheme {
	case memblob.Scheme, "s3", "gs", "azblob":
	default:
		return resolved{}, fmt.Errorf("unsupported scheme %q: use file://, mem://, s3://, gs:// or azblob://", u.Scheme)
	}
	if u.Host == "" {
		return resolved{}, fmt.Errorf("%s:// URI needs a bucket name: %s://<bucket>/<prefix>", u.Scheme, u.Scheme)
	}
	if u.User != nil || u.Fragment != "" {
		return resolved{}, fmt.Errorf("URI must not have user info or a fragment")
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		prefix += "/"
		if err := checkPrefix(prefix); err != nil {
			return resolved{}, fmt.Errorf("prefix %q: %w", prefix, err)
		}
	}
	if u.Scheme == memblob.Scheme && u.RawQuery != "" {
		return resolved{}, fmt.Errorf("mem:// takes no query parameters")
	}
	bu := url.URL{Scheme: u.Scheme, Host: u.Host, RawQuery: u.RawQuery}
	canon := url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/" + strings.TrimSuffix(prefix, "/"), RawQuery: u.RawQuery}
	if prefix == "" {
		canon.Path = ""
	}
	return resolved{
		scheme:    u.Scheme,
		uri:       canon.String(),
		bucket:    u.Host,
		bucketURL: bu.String(),
		prefix:    prefix,
	}, nil
}

// resolveFile resolves the part of a file:// URI after "file://".
func resolveFile(p string, opts Options) (resolved, error) {
	if strings.ContainsAny(p, "?#") {
		return resolved{}, fmt.Errorf("file:// URI takes no query or fragment")
	}
	if p == "" {
		return resolved{}, fmt.Errorf("file:// URI needs a path")
	}
	if !filepath.IsAbs(p) {
		base := opts.BaseDir
		if base == "" {
			base = "."
		}
		p = filepath.Join(base, p)
	}
	dir, err := filepath.Abs(p)
	if err != nil {
		return resolved{}, err
	}
	return resolved{scheme: fileblob.Scheme, uri: "file://" + filepath.ToSlash(dir), dir: dir}, nil
}

// memBuckets holds the mem:// buckets of the process by name. It is
// process-wide (as is what mkdirAllSync knows of directories): two Open calls of "mem://x" must reach the
// same objects (a multi-writer test opens a table twice), and gocloud's
// mem opener returns a fresh empty bucket per call, so something
// process-wide has to remember them. Buckets are never freed.
var memBuckets struct {
	sync.Mutex
	m map[string]*blob.Bucket
}

// memBucket returns the process-wide memblob bucket called name. The
// returned bucket is wrapped (PrefixedBucket or not) per Open; closing a
// wrapper never closes the shared one because memblob's Close is a no-op.
func memBucket(name string) *blob.Bucket {
	memBuckets.Lock()
	defer memBuckets.Unlock()
	if memBuckets.m == nil {
		memBuckets.m = make(map[string]*blob.Bucket)
	}
	mb, ok := memBuckets.m[name]
	if !ok {
		mb = memblob.OpenBucket(&memblob.Options{NoMD5: true})
		memBuckets.m[name] = mb
	}
	return blob.PrefixedBucket(mb, "")
}
