package storage

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/quiver-ingest/quiver/writers"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name, uri string
		want      resolved
	}{
		{"s3 path style endpoint", "s3://bkt/tables/events?region=us-east-1&endpoint=http://127.0.0.1:9000&use_path_style=true",
			resolved{scheme: "s3", bucket: "bkt", prefix: "tables/events/",
				bucketURL: "s3://bkt?region=us-east-1&endpoint=http://127.0.0.1:9000&use_path_style=true",
				uri:       "s3://bkt/tables/events?region=us-east-1&endpoint=http://127.0.0.1:9000&use_path_style=true"}},
		{"s3 legacy path style, trailing slash", "s3://bkt/t/?s3ForcePathStyle=true",
			resolved{scheme: "s3", bucket: "bkt", prefix: "t/", bucketURL: "s3://bkt?s3ForcePathStyle=true", uri: "s3://bkt/t?s3ForcePathStyle=true"}},
		{"s3 bucket root", "s3://bkt",
			resolved{scheme: "s3", bucket: "bkt", bucketURL: "s3://bkt", uri: "s3://bkt"}},
		{"gs", "gs://bkt/a/b", resolved{scheme: "gs", bucket: "bkt", prefix: "a/b/", bucketURL: "gs://bkt", uri: "gs://bkt/a/b"}},
		{"azblob", "azblob://container/t?domain=blob.core.windows.net",
			resolved{scheme: "azblob", bucket: "container", prefix: "t/", bucketURL: "azblob://container?domain=blob.core.windows.net",
				uri: "azblob://container/t?domain=blob.core.windows.net"}},
		{"mem", "mem://name/t", resolved{scheme: "mem", bucket: "name", prefix: "t/", bucketURL: "mem://name", uri: "mem://name/t"}},
		{"file absolute", "file:///data/t", resolved{scheme: "file", dir: "/data/t", uri: "file:///data/t"}},
		{"file relative", "file://./t", resolved{scheme: "file", dir: "/base/t", uri: "file:///base/t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolve(tc.uri, Options{BaseDir: "/base"})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("resolve(%q)\n got %+v\nwant %+v", tc.uri, got, tc.want)
			}
		})
	}
}

func TestOpenInvalid(t *testing.T) {
	for _, uri := range []string{
		"http://example.com/t", "/no/scheme", "s3:///no-bucket", "s3://bkt/a/../b", "mem://x?nomd5",
		"file://", "file:///t?x=1", "s3://bkt/t?unknown_param=1", "s3://bkt/t?use_path_style=maybe",
	} {
		t.Run(uri, func(t *testing.T) {
			b, err := Open(t.Context(), uri, Options{})
			if err == nil {
				b.Close()
				t.Fatalf("Open(%q) succeeded", uri)
			}
			if strings.Contains(uri, "param") || strings.Contains(uri, "maybe") {
				return // rejected by s3blob's own URL parsing: not classified as invalid
			}
			if !errors.Is(err, writers.ErrInvalid) {
				t.Errorf("Open(%q): err = %v, want ErrInvalid", uri, err)
			}
		})
	}
}

// TestOpenS3Options checks that the query parameters reach the S3 client
// (the endpoint override is proven by TestS3AgainstFake, which also
// answers the bucket check of Open here).
func TestOpenS3Options(t *testing.T) {
	srv := httptest.NewServer(&fakeS3{objects: map[string][]byte{}})
	t.Cleanup(srv.Close)
	b := mustOpen(t, "s3://bkt/t?region=eu-west-3&use_path_style=true&anonymous=true&endpoint="+srv.URL, Options{})
	var c *s3.Client
	if !b.blob.As(&c) {
		t.Fatal("bucket is not an s3 bucket")
	}
	o := c.Options()
	if o.Region != "eu-west-3" || !o.UsePathStyle {
		t.Errorf("s3 options: region %q, path style %v", o.Region, o.UsePathStyle)
	}
}

// fakeS3 is the part of the S3 REST API Bucket uses, path-style, with
// If-None-Match: * on PUT. It records the StartAfter of each listing.
type fakeS3 struct {
	mu         sync.Mutex
	objects    map[string][]byte // "bucket/key"
	startAfter []string
	conflicts  int // answer this many conditional PUTs with 409 first
}

// setConflicts makes the next n conditional PUTs answer 409.
func (f *fakeS3) setConflicts(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conflicts = n
}

// object returns the stored object at "bucket/key".
func (f *fakeS3) object(path string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return string(f.objects[path])
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	s3err := func(status int, code string) {
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, "<Error><Code>"+code+"</Code><Message>"+code+"</Message></Error>")
		}
	}
	switch {
	case r.Method == http.MethodGet && key == "" && r.URL.Query().Get("list-type") == "2":
		q := r.URL.Query()
		f.startAfter = append(f.startAfter, q.Get("start-after"))
		type content struct {
			Key          string
			Size         int
			LastModified string
		}
		res := struct {
			XMLName     xml.Name `xml:"ListBucketResult"`
			Name        string
			Prefix      string
			KeyCount    int
			IsTruncated bool
			Contents    []content
		}{Name: bucket, Prefix: q.Get("prefix")}
		var keys []string
		for k := range f.objects {
			if k, ok := strings.CutPrefix(k, bucket+"/"); ok && strings.HasPrefix(k, q.Get("prefix")) && k > q.Get("start-after") {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			res.Contents = append(res.Contents, content{k, len(f.objects[bucket+"/"+k]), time.Now().UTC().Format(time.RFC3339)})
		}
		res.KeyCount = len(keys)
		w.Header().Set("Content-Type", "application/xml")
		_ = xml.NewEncoder(w).Encode(res)
	case r.Method == http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		if f.conflicts > 0 && r.Header.Get("If-None-Match") == "*" {
			f.conflicts--
			s3err(http.StatusConflict, "ConditionalRequestConflict")
			return
		}
		if _, ok := f.objects[path]; ok && r.Header.Get("If-None-Match") == "*" {
			s3err(http.StatusPreconditionFailed, "PreconditionFailed")
			return
		}
		f.objects[path] = body
		w.Header().Set("ETag", `"etag"`)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		data, ok := f.objects[path]
		if !ok {
			s3err(http.StatusNotFound, "NoSuchKey")
			return
		}
		w.Header().Set("ETag", `"etag"`)
		http.ServeContent(w, r, "", time.Now(), bytes.NewReader(data)) // HEAD and Range included
	case r.Method == http.MethodDelete:
		delete(f.objects, path)
		w.WriteHeader(http.StatusNoContent)
	default:
		s3err(http.StatusNotImplemented, "NotImplemented")
	}
}

// TestS3AgainstFake runs Bucket over s3blob against an in-process fake S3
// with an endpoint override and path-style addressing: the conditional
// write's 412 must surface as ErrAlreadyExists, a missing key as
// ErrNotExist, and startAfter must reach S3 with the root prefix.
func TestS3AgainstFake(t *testing.T) {
	fake := &fakeS3{objects: map[string][]byte{}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	b := mustOpen(t, "s3://bkt/tables/t1?region=us-east-1&anonymous=true&use_path_style=true"+
		"&request_checksum_calculation=when_required&response_checksum_validation=when_required&endpoint="+srv.URL, Options{})
	ctx := t.Context()

	if _, err := b.Get(ctx, "_delta_log/00000000000000000000.json"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("Get missing: err = %v, want ErrNotExist", err)
	}
	fake.setConflicts(1) // retried
	if err := b.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("first")); err != nil {
		t.Fatalf("PutIfAbsent: %v", err)
	}
	fake.setConflicts(1)
	err := b.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("second"))
	if !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("second PutIfAbsent: err = %v, want ErrAlreadyExists", err)
	}
	if got := fake.object("bkt/tables/t1/_delta_log/00000000000000000000.json"); got != "first" {
		t.Fatalf("stored object = %q, want first", got)
	}
	wantContent(t, b, "_delta_log/00000000000000000000.json", "first")
	fake.setConflicts(conflictRetries + 1)
	if err := b.PutIfAbsent(ctx, "k", nil); err == nil || errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("PutIfAbsent against endless conflicts: err = %v, want a plain failure", err)
	}
	mustPut(t, b, "_delta_log/00000000000000000001.json", "v1")
	mustPut(t, b, "part-0.parquet", "0123456789")

	r, size, err := b.OpenReader(ctx, "part-0.parquet")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4)
	if n, err := r.ReadAt(p, 6); size != 10 || n != 4 || err != nil || string(p) != "6789" {
		t.Fatalf("ReadAt = %d %q %v (size %d)", n, p[:n], err, size)
	}
	_ = r.Close()

	got := listKeys(t, b, "_delta_log/", "_delta_log/00000000000000000000.json")
	if !slices.Equal(got, []string{"_delta_log/00000000000000000001.json"}) {
		t.Fatalf("List = %q", got)
	}
	fake.mu.Lock()
	sent := slices.Clone(fake.startAfter)
	fake.mu.Unlock()
	if want := "tables/t1/_delta_log/00000000000000000000.json"; !slices.Contains(sent, want) {
		t.Errorf("start-after sent to S3 = %q, want %q", sent, want)
	}
	if err := b.Delete(ctx, "part-0.parquet"); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "part-0.parquet"); err != nil {
		t.Fatalf("Delete missing: %v", err)
	}
}
