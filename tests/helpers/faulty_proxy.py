"""An HTTP proxy that fails a set fraction of requests, for the storage-fault tests.

    python tests/helpers/faulty_proxy.py PORT UPSTREAM FRACTION SEED

Listens on 127.0.0.1:PORT and forwards every request to UPSTREAM (the moto S3 server),
except that each request is, with probability FRACTION (seeded), answered by a fault
instead: half of them ``503 SlowDown`` (S3's throttling answer, with its XML body), half
a connection closed without an answer (a reset).  ``GET /__faults__`` answers the
counts as JSON and is not forwarded.
"""
from __future__ import annotations

import http.client
import json
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")


def main():
    port, upstream, fraction, seed = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    target = urlsplit(upstream)
    rng, lock = random.Random(seed), threading.Lock()
    counts = {"requests": 0, "slow_down": 0, "reset": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _forward(self):
            if self.path == "/__faults__":
                body = json.dumps(counts).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            with lock:
                counts["requests"] += 1
                draw, kind = rng.random(), rng.random()
            if draw < fraction and kind < 0.5:
                with lock:
                    counts["slow_down"] += 1
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(SLOW_DOWN)))
                self.end_headers()
                self.wfile.write(SLOW_DOWN)
                return
            if draw < fraction:
                with lock:
                    counts["reset"] += 1
                self.close_connection = True
                self.connection.close()
                return
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            conn.request(self.command, self.path, body=body, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
            self.send_response(reply.status, reply.reason)
            for key, value in reply.getheaders():
                if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
