"""Hostile HTTP servers on 127.0.0.1 for the network tests: one that never answers, one that sends
a status line and then one byte a second, and one that redirects elsewhere while recording which
requests carried an Authorization header."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RawServer:
    """A TCP server whose every connection is handled by ``mode``: ``"silent"`` reads the request
    and never answers; ``"trickle"`` sends ``HTTP/1.1 200 OK`` and then a header one byte a second,
    forever. ``connections`` counts accepted connections."""

    def __init__(self, mode: str):
        self.mode = mode
        self.connections = 0
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.connections += 1
            self._conns.append(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(0.5)
            try:
                conn.recv(65536)
            except OSError:
                pass
            if self.mode == "trickle":
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            while not self._stop.is_set():
                if self.mode == "trickle":
                    conn.sendall(b"a")
                time.sleep(1.0)
        except OSError:
            pass  # the client hung up: what a deadline is for
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        for conn in self._conns:
            try:
                conn.close()
            except OSError:
                pass


class Recorder(BaseHTTPRequestHandler):
    """Answers every request with ``server.answer(handler)``; records (path, method, Authorization)."""

    def _any(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else b""
        self.server.seen.append((self.path, self.command, self.headers.get("Authorization")))
        code, headers, body = self.server.answer(self)
        self.send_response(code)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _any

    def log_message(self, *args):
        pass


def http_server(answer) -> tuple[ThreadingHTTPServer, str]:
    """A threaded HTTP server on 127.0.0.1 whose handler calls ``answer(handler)`` ->
    (status, headers, body); ``server.seen`` lists (path, method, Authorization)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.daemon_threads = True
    server.seen = []
    server.answer = answer
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
