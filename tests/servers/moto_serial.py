"""Serve moto's S3 (and every other backend) one request at a time.

`moto_server` runs werkzeug with `threaded=True`: each connection gets its
own thread, and moto's conditional writes (check If-None-Match / If-Match,
then store) are not atomic across threads, so two concurrent
`If-None-Match: *` PUTs can both succeed. This launcher serves the same WSGI
application with `threaded=False` and `processes=1`: the server accepts,
reads, handles and answers one connection before it accepts the next, so
every request sees the effects of the previous one. It also stays on
HTTP/1.0 (werkzeug enables HTTP/1.1 keep-alive only for threaded servers),
so a client cannot hold the single worker with an idle keep-alive
connection.

Usage (the Rust harness in tests/src/servers runs it with the venv's
python): python moto_serial.py -H 127.0.0.1 -p PORT
"""

import argparse
import os
import signal
import sys

from werkzeug.serving import run_simple

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)


def _exit(signum, frame):
    sys.exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()

    # moto_server does the same: some backends call the server itself.
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGINT, _exit)
    signal.signal(signal.SIGTERM, _exit)

    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        args.host,
        args.port,
        app,
        threaded=False,
        processes=1,
        use_reloader=False,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
