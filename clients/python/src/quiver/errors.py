"""Quiver's errors: one exception class per gRPC status class, carrying the
server's message.

pyarrow.flight raises its own classes (FlightUnavailableError, ArrowInvalid,
ArrowKeyError, ...), several of which cover more than one gRPC code; the
code is in the message ("Flight returned not found error, with message:
..."), which :func:`translate` reads to pick the class below.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.flight as flight

__all__ = [
    "QuiverError",
    "InvalidInputError",
    "NotFoundError",
    "AlreadyExistsError",
    "WrongStateError",
    "ConflictError",
    "ResourceExhaustedError",
    "UnavailableError",
    "PermissionDeniedError",
    "UnauthenticatedError",
    "OutcomeUnknownError",
    "UnsupportedError",
    "CancelledError",
    "TimeoutError",
    "InternalError",
]


class QuiverError(Exception):
    """An error the server (or the transport) answered. `code` is the gRPC
    status name ("INVALID_ARGUMENT", ...), `message` the server's message;
    `retryable` is True for the classes a retry can cure (the call itself
    must still be safe to repeat, see docs/clients.md)."""

    code = "UNKNOWN"
    retryable = False

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidInputError(QuiverError, ValueError):
    """InvalidArgument: a malformed request, a schema that does not match the
    endpoint's, a refused batch. Fix the input; never retry as is."""

    code = "INVALID_ARGUMENT"


class NotFoundError(QuiverError, LookupError):
    """NotFound: an unknown endpoint or transaction."""

    code = "NOT_FOUND"


class AlreadyExistsError(QuiverError):
    """AlreadyExists (Flight SQL ingest with mode "create" on an endpoint)."""

    code = "ALREADY_EXISTS"


class WrongStateError(QuiverError):
    """FailedPrecondition: the transaction is in the wrong state (fenced by a
    later epoch, not precommitted, already ended)."""

    code = "FAILED_PRECONDITION"


class ConflictError(QuiverError):
    """Aborted: a commit conflict in the sink; nothing was published. An
    auto-commit put may be sent again; a transaction is rolled back and
    its epoch replayed."""

    code = "ABORTED"


class ResourceExhaustedError(QuiverError):
    """ResourceExhausted: a batch above the server's limits
    (limits.max_message_bytes): lower max_batch_bytes in connect()."""

    code = "RESOURCE_EXHAUSTED"


class UnavailableError(QuiverError, ConnectionError):
    """Unavailable: the server or the endpoint's sink cannot be reached now.
    Retryable: idempotent calls are retried by the client."""

    code = "UNAVAILABLE"
    retryable = True


class PermissionDeniedError(QuiverError, PermissionError):
    """PermissionDenied: the token may not use this endpoint or action."""

    code = "PERMISSION_DENIED"


class UnauthenticatedError(QuiverError):
    """Unauthenticated: no token, or an unknown one."""

    code = "UNAUTHENTICATED"


class OutcomeUnknownError(QuiverError):
    """Unknown: a commit whose outcome is unknown. Ask
    Client.committed_epoch() before committing again or replaying."""

    code = "UNKNOWN"


class UnsupportedError(QuiverError, NotImplementedError):
    """Unimplemented: the server does not offer this call."""

    code = "UNIMPLEMENTED"


class CancelledError(QuiverError):
    """Cancelled: the call was cancelled (by the client, or a server stopping)."""

    code = "CANCELLED"


class TimeoutError(QuiverError):  # noqa: A001 - the gRPC class, not the builtin
    """DeadlineExceeded: the call's timeout passed."""

    code = "DEADLINE_EXCEEDED"


class InternalError(QuiverError):
    """Internal: a server bug; the message says what failed."""

    code = "INTERNAL"


# The error kinds in pyarrow's messages ("<kind> error, with message:").
_KINDS: dict[str, tuple[type[QuiverError], str]] = {
    "invalid argument": (InvalidInputError, "INVALID_ARGUMENT"),
    "out of range": (InvalidInputError, "OUT_OF_RANGE"),
    "not found": (NotFoundError, "NOT_FOUND"),
    "already exists": (AlreadyExistsError, "ALREADY_EXISTS"),
    "precondition failed": (WrongStateError, "FAILED_PRECONDITION"),
    "aborted": (ConflictError, "ABORTED"),
    "resource exhausted": (ResourceExhaustedError, "RESOURCE_EXHAUSTED"),
    "unavailable": (UnavailableError, "UNAVAILABLE"),
    "unauthorized": (PermissionDeniedError, "PERMISSION_DENIED"),
    "permission denied": (PermissionDeniedError, "PERMISSION_DENIED"),
    "unauthenticated": (UnauthenticatedError, "UNAUTHENTICATED"),
    "unknown": (OutcomeUnknownError, "UNKNOWN"),
    "unimplemented": (UnsupportedError, "UNIMPLEMENTED"),
    "cancelled": (CancelledError, "CANCELLED"),
    "timed out": (TimeoutError, "DEADLINE_EXCEEDED"),
    "deadline exceeded": (TimeoutError, "DEADLINE_EXCEEDED"),
    "internal": (InternalError, "INTERNAL"),
}

# pyarrow's Flight classes, for messages without a kind. Arrow's own
# classes (ArrowInvalid, ...) count only with a Flight message: raised
# without one, they come from the caller's data, not from the server.
_CLASSES: list[tuple[type[BaseException], type[QuiverError]]] = [
    (flight.FlightUnavailableError, UnavailableError),
    (flight.FlightUnauthenticatedError, UnauthenticatedError),
    (flight.FlightUnauthorizedError, PermissionDeniedError),
    (flight.FlightTimedOutError, TimeoutError),
    (flight.FlightCancelledError, CancelledError),
    (flight.FlightInternalError, InternalError),
]

_MESSAGE = re.compile(
    r"^(?:Flight|gRPC) returned (?P<kind>[a-z ]+?) error, with message: (?P<msg>.*?)"
    r"(?:\. gRPC client debug context:.*|\. Client context:.*|\. Detail:.*)?$",
    re.DOTALL,
)


def translate(err: BaseException) -> BaseException:
    """The QuiverError for an exception pyarrow.flight raised; other
    exceptions (an error in the caller's data, say) are returned as they
    are."""
    if isinstance(err, QuiverError):
        return err
    if not isinstance(err, (flight.FlightError, pa.ArrowException)):
        return err
    text = str(err)
    m = _MESSAGE.match(text)
    if m and m["kind"] in _KINDS:
        cls, code = _KINDS[m["kind"]]
        return cls(m["msg"], code)
    for pa_cls, cls in _CLASSES:
        if isinstance(err, pa_cls):
            return cls(text)
    if isinstance(err, flight.FlightError):
        return QuiverError(text)
    return err
