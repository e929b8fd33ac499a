"""Quiver's Python client, built on pyarrow.flight.

    import quiver

    client = quiver.connect("grpc://127.0.0.1:8815", token=None)
    ack = client.put("events", table)            # auto-commit: one sink commit
    with client.transaction("job-1", 7) as tx:   # exactly-once under (writer, epoch)
        tx.put("events", table)
    tx.commit()                                  # precommitted on exit; publish
    with client.stream("events", "collector-7") as s:  # continuous, exactly-once by seq
        s.write(batch)

Errors are :class:`quiver.QuiverError` subclasses, one per gRPC class
(quiver.errors). The API is documented in docs/clients.md.
"""

from .client import DEFAULT_MAX_BATCH_BYTES, Ack, Client, Stream, Transaction, TxnResult, connect
from .errors import (
    AlreadyExistsError,
    CancelledError,
    ConflictError,
    InternalError,
    InvalidInputError,
    NotFoundError,
    OutcomeUnknownError,
    PermissionDeniedError,
    QuiverError,
    ResourceExhaustedError,
    TimeoutError,
    UnauthenticatedError,
    UnavailableError,
    UnsupportedError,
    WrongStateError,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_BATCH_BYTES",
    "Ack",
    "AlreadyExistsError",
    "CancelledError",
    "Client",
    "ConflictError",
    "InternalError",
    "InvalidInputError",
    "NotFoundError",
    "OutcomeUnknownError",
    "PermissionDeniedError",
    "QuiverError",
    "ResourceExhaustedError",
    "Stream",
    "TimeoutError",
    "Transaction",
    "TxnResult",
    "UnauthenticatedError",
    "UnavailableError",
    "UnsupportedError",
    "WrongStateError",
    "connect",
]
