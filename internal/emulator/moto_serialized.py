"""moto's S3 server, serving one request at a time.

moto checks PutObject's If-None-Match and stores the object in two steps,
so under moto_server's threaded server two racing conditional PUTs can
both win, which S3 never allows. A lock around each request makes the
check atomic; connections still get a thread each, so keep-alive clients
do not block one another between requests.

With --auth BUCKET it also checks credentials, as S3 does: moto's IAM
authentication is turned on (every request must be signed by a key IAM
knows, allowed by the key's policy), one user with a key allowed
everything and one bucket are created, and the key is printed
("credentials KEY_ID SECRET") before the server starts.

Usage: python moto_serialized.py HOST PORT [--auth BUCKET]
"""

import json
import os
import sys
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


def serialized(app):
    lock = threading.Lock()

    def call(environ, start_response):
        with lock:
            return list(app(environ, start_response))  # the whole response, under the lock

    return call


def require_auth(bucket: str) -> None:
    from moto import settings
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.iam.models import iam_backends
    from moto.s3.models import s3_backends

    # Set up in process: requests would already need a key.
    iam = iam_backends[DEFAULT_ACCOUNT_ID]["aws"]
    iam.create_user("us-east-1", "quiver")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy("quiver", "all", json.dumps(policy))
    key = iam.create_access_key("quiver")
    s3_backends[DEFAULT_ACCOUNT_ID]["aws"].create_bucket(bucket, "us-east-1")
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0  # authenticate from the first request
    print("credentials", key.access_key_id, key.secret_access_key, flush=True)


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    if sys.argv[3:4] == ["--auth"]:
        require_auth(sys.argv[4])
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, serialized(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
