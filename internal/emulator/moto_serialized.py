"""moto's S3 server, serving one request at a time.

moto checks PutObject's If-None-Match and stores the object in two steps,
so under moto_server's threaded server two racing conditional PUTs can
both win, which S3 never allows. A lock around each request makes the
check atomic; connections still get a thread each, so keep-alive clients
do not block one another between requests.

Usage: python moto_serialized.py HOST PORT
"""

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


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, serialized(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
