package storage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"

	"github.com/quiver-ingest/quiver/writers"
)

// Errors reported distinctly from every other failure.
var (
	// ErrNotExist: the object does not exist.
	ErrNotExist = errors.New("storage: object does not exist")
	// ErrAlreadyExists: PutIfAbsent found the key taken (a lost race).
	ErrAlreadyExists = errors.New("storage: object already exists")
	// ErrNoBucket: Open found no bucket (S3, GCS) or container (Azure)
	// of the root's name. It wraps writers.ErrInvalid: a configuration
	// error, not a transient one.
	ErrNoBucket = writers.Errorf(writers.ErrInvalid, "storage: bucket does not exist")
)

// Error is the error every Bucket method returns. Class is ErrNotExist,
// ErrAlreadyExists, ErrNoBucket (Open only) or a writers class (ErrInvalid for a bad key or URI,
// ErrPermissionDenied, ErrUnavailable for any other failure); errors.Is
// matches both Class and Err.
type Error struct {
	Op    string // "get", "put", "put-if-absent", "list", ...
	URI   string // the bucket root
	Key   string // empty for bucket-wide operations
	Class error
	Err   error // the cause; may be nil when Class says it all
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("storage: %s %s", e.Op, e.URI)
	if e.Key != "" {
		msg += fmt.Sprintf(" key %q", e.Key)
	}
	if e.Err == nil || e.Class == ErrNotExist || e.Class == ErrAlreadyExists || e.Class == ErrNoBucket {
		// The sentinel says it all; the driver's wording adds nothing.
		return msg + ": " + strings.TrimPrefix(e.Class.Error(), "storage: ")
	}
	return msg + ": " + e.Err.Error()
}

// Unwrap returns the class and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Class}
	}
	return []error{e.Class, e.Err}
}

// wrap classifies err (from os or gocloud) and names op, key and the root.
// Context errors keep their identity (errors.Is(err, context.Canceled)).
func (b *Bucket) wrap(op, key string, err error) error {
	return &Error{Op: op, URI: b.uri, Key: key, Class: classify(err), Err: err}
}

func classify(err error) error {
	var se *Error
	switch {
	case errors.As(err, &se):
		return se.Class
	case errors.Is(err, ErrNoBucket):
		return ErrNoBucket
	case errors.Is(err, ErrNotExist), errors.Is(err, os.ErrNotExist):
		return ErrNotExist
	case errors.Is(err, ErrAlreadyExists):
		return ErrAlreadyExists
	case errors.Is(err, writers.ErrInvalid):
		return writers.ErrInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return writers.ErrUnavailable
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return ErrNotExist
	case gcerrors.InvalidArgument:
		return writers.ErrInvalid
	case gcerrors.PermissionDenied:
		return writers.ErrPermissionDenied
	}
	// Drivers leave some refusals Unknown (azureblob: 403
	// AuthorizationFailure for a wrong key), which would read as transient.
	switch httpStatus(err) {
	case http.StatusUnauthorized:
		return writers.ErrUnauthenticated
	case http.StatusForbidden:
		return writers.ErrPermissionDenied
	}
	return writers.ErrUnavailable
}

// httpStatus returns the HTTP status of a cloud driver's error, 0 when it
// has none.
func httpStatus(err error) int {
	var az *azcore.ResponseError
	var aws interface{ HTTPStatusCode() int }
	var gcs *googleapi.Error
	switch {
	case errors.As(err, &az):
		return az.StatusCode
	case errors.As(err, &aws):
		return aws.HTTPStatusCode()
	case errors.As(err, &gcs):
		return gcs.Code
	}
	return 0
}
