"""S3-compatible stores that differ from the tests' S3 server (moto's, tests/conftest.py) in one way, for
the tests: a loopback HTTP proxy in front of it that drops the named condition headers from every
request (a store that accepts ``If-None-Match`` or ``If-Match`` and does not act on them looks exactly
like this to a client), or whose clock runs ahead of this machine's (its ``Date`` and
``Last-Modified`` headers shifted), and passes everything else through unchanged."""

from __future__ import annotations

import contextlib
import datetime
import http.client
import threading
from email.utils import format_datetime, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# hop-by-hop or recomputed: the proxy sets its own
_NOT_PASSED = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class _Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, dropped: set[str], clock_ahead: float):
        super().__init__(("127.0.0.1", 0), _Forward)
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.dropped = {name.lower() for name in dropped}
        self.clock_ahead = datetime.timedelta(seconds=clock_ahead)


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {name: value for name, value in self.headers.items()
                   if name.lower() not in self.server.dropped and name.lower() not in _NOT_PASSED}
        upstream = http.client.HTTPConnection(*self.server.upstream, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        self.send_response_only(answer.status, answer.reason)  # the store's own Date and Server, not the proxy's
        for name, value in answer.getheaders():
            if name.lower() in ("date", "last-modified") and self.server.clock_ahead:
                value = format_datetime(parsedate_to_datetime(value) + self.server.clock_ahead, usegmt=True)
            if name.lower() not in _NOT_PASSED:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    def log_message(self, *args) -> None:  # quiet: the tests read their own output
        pass


@contextlib.contextmanager
def proxied_store(upstream: str, dropped: tuple[str, ...] = (), clock_ahead: float = 0.0):
    """The URL of a proxy to ``upstream`` that drops the ``dropped`` headers and puts the store's clock
    ``clock_ahead`` seconds ahead, while the block runs."""
    proxy = _Proxy(upstream, set(dropped), clock_ahead)
    thread = threading.Thread(target=proxy.serve_forever, name="s3-proxy", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}"
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join()
