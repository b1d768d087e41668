"""HTTP to a Prometheus server: credentials, TLS, one deadline per operation, a size cap.

Requests go through ``http.client`` directly (not ``urllib``) for two guarantees:

- a deadline bounds the whole operation, from connect to the last byte: a watchdog shuts the
  socket down when it passes, so a server that sends its headers and then one byte a second is
  cut off on time, and every request of one operation (a refresh's query, its targets and static
  facts; a backfill) shares one ``Deadline``;
- redirects are followed here (at most ``MAX_REDIRECTS``), and the ``Authorization`` header (basic
  from the URL or the environment, or the bearer token) is sent only to the configured origin
  (scheme, host, port): a redirect to another origin gets no credentials.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping

from fleet_tui.core.monitor.sources.prometheus.parse import PrometheusResponseError
from fleet_tui.core.records import record
from fleet_tui.core.redact import redact_url, remember, split_url
from fleet_tui.core.textsafe import clean

# Reading and parsing an answer peaks at ~8.4x its size (chunks, joined bytes, a dict per series:
# 375 MB for a 47 MB vector of 200,000 series), so 128 MiB keeps one answer near 1.1 GB, under the
# 1.5 GB one input may cost; it holds ~500,000 instant series (~30,000 GPUs' readings) or a
# 30-day hourly range of ~7,000 series. More means a runaway query.
MAX_RESPONSE_BYTES = 128 << 20
MAX_REDIRECTS = 5
_REDIRECTS = (301, 302, 303, 307, 308)


def redact(url: str) -> str:
    """Kept for callers of the package: ``core.redact.redact_url``."""
    return redact_url(url)


@record
class Deadline:
    """A point in monotonic time shared by every request of one operation."""

    at: float
    total_s: float

    @classmethod
    def after(cls, seconds: float) -> "Deadline":
        return cls(time.monotonic() + seconds, seconds)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def error(self) -> TimeoutError:
        return TimeoutError(f"timed out: no complete answer within {self.total_s:g} s")

    def sooner(self, other: "Deadline | None") -> "Deadline":
        return self if other is None or self.at <= other.at else other


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _abort(conn: http.client.HTTPConnection) -> None:
    """The watchdog: wake any blocked connect/send/recv of ``conn`` (the deadline passed)."""
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def parse_duration_s(text: str) -> float | None:
    """Prometheus durations such as '15s', '1m', '1m30s', '500ms'."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    total, num, i = 0.0, "", 0
    try:
        while i < len(text):
            ch = text[i]
            if ch.isdigit() or ch == ".":
                num += ch
                i += 1
                continue
            unit = "ms" if text.startswith("ms", i) else ch
            total += float(num) * units[unit]
            num, i = "", i + len(unit)
    except (KeyError, ValueError):
        return None
    return total if not num and total > 0 else None


class PrometheusClient:
    """Requests to one server's HTTP API (``url``: its base URL, also behind a path prefix).

    Credentials: ``token`` (bearer) or ``basic_auth=(user, password)``; when neither is given, the
    environment's ``FLEET_TUI_PROM_TOKEN`` or ``FLEET_TUI_PROM_USER``/``FLEET_TUI_PROM_PASSWORD``
    (or user:pass in the URL). They travel only in the Authorization header, only to this URL's
    origin, and ``url`` (what is shown) carries none of them. TLS certificates are verified unless
    ``verify_tls=False`` (or ``FLEET_TUI_PROM_INSECURE=1``); ``ca_file`` adds a CA bundle. The URL
    must already be checked (http/https with a host)."""

    def __init__(self, url: str, *, token: str | None = None,
                 basic_auth: tuple[str, str] | None = None, verify_tls: bool | None = None,
                 ca_file: str | None = None, timeout_s: float = 5.0,
                 env: Mapping[str, str] | None = None):
        env = os.environ if env is None else env
        split = split_url(url)  # the user information ends at the last "@" (core.redact)
        if split.username and basic_auth is None and token is None:
            basic_auth = (split.username, split.password or "")
        self._base = split.url.rstrip("/")
        self.url = redact_url(self._base)
        self.origin = origin(self._base)
        if token is None and basic_auth is None:
            token = env.get("FLEET_TUI_PROM_TOKEN") or None
            user = env.get("FLEET_TUI_PROM_USER")
            if token is None and user:
                basic_auth = (user, env.get("FLEET_TUI_PROM_PASSWORD", ""))
        self.auth_header: str | None = None
        if token:
            remember(token)
            self.auth_header = f"Bearer {token}"
        elif basic_auth:
            remember(basic_auth[1])
            raw = f"{basic_auth[0]}:{basic_auth[1]}".encode()
            self.auth_header = "Basic " + base64.b64encode(raw).decode("ascii")
        if verify_tls is None:
            verify_tls = env.get("FLEET_TUI_PROM_INSECURE", "").lower() not in ("1", "true", "yes")
        self.verify_tls = verify_tls
        self._ca_file = ca_file
        self._ssl: ssl.SSLContext | None = None
        if urllib.parse.urlsplit(self._base).scheme == "https":
            self._ssl = self._tls_context()
        self.timeout_s = float(timeout_s)
        # PromQL durations take no fractions ("0.5s" is refused): milliseconds
        self.promql_timeout = f"{max(1, int(self.timeout_s * 1000))}ms"

    def _tls_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self._ca_file)
        if not self.verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def deadline(self) -> Deadline:
        """A fresh deadline of ``timeout_s`` for one operation."""
        return Deadline.after(self.timeout_s)

    def get(self, path: str, params: Mapping[str, str] | None = None, *, post: bool = False,
            deadline: Deadline | None = None) -> bytes:
        """One request (following redirects) done before ``deadline`` (default: ``timeout_s``
        from now); raises OSError (TimeoutError past the deadline) / PrometheusResponseError."""
        deadline = deadline or self.deadline()
        url = self._base + path
        encoded = urllib.parse.urlencode(params) if params else ""
        method, data = ("POST", encoded.encode()) if post and encoded else ("GET", None)
        if encoded and data is None:
            url = f"{url}?{encoded}"
        for _ in range(MAX_REDIRECTS + 1):
            status, reason, location, body = self._exchange(method, url, data, deadline)
            if status not in _REDIRECTS:
                return self._checked(status, reason, body)
            if not location:
                raise PrometheusResponseError(f"HTTP {status} {reason} without a Location")
            url = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                raise PrometheusResponseError(f"HTTP {status} redirect to {redact_url(url)}: "
                                              "not an http(s) URL")
            if status == 303 or (status in (301, 302) and method == "POST"):
                # the follow-up is a GET (RFC 9110 15.4); the query moves into the URL
                if data:
                    url += ("&" if "?" in url else "?") + data.decode()
                method, data = "GET", None
        raise PrometheusResponseError(f"more than {MAX_REDIRECTS} redirects")

    def _exchange(self, method: str, url: str, data: bytes | None, deadline: Deadline,
                  ) -> tuple[int, str, str | None, bytes]:
        """One HTTP exchange on its own connection, all of it before ``deadline``."""
        remaining = deadline.remaining()
        if remaining <= 0:
            raise deadline.error()
        parts = urllib.parse.urlsplit(url)
        target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        host = parts.netloc.rpartition("@")[2]  # a Location's user info is never used
        headers = {"Accept": "application/json", "User-Agent": "fleet-tui", "Host": host}
        if data is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if self.auth_header and origin(url) == self.origin:
            headers["Authorization"] = self.auth_header  # never to another origin
        hostname = parts.hostname
        if not hostname:  # e.g. a redirect to "http:///path"
            raise PrometheusResponseError(f"{redact_url(url)}: the URL names no host")
        if parts.scheme == "https":
            if self._ssl is None:
                self._ssl = self._tls_context()
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                hostname, parts.port, timeout=remaining, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(hostname, parts.port, timeout=remaining)
        watchdog = threading.Timer(remaining, _abort, (conn,))
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request(method, target, body=data, headers=headers)
            response = conn.getresponse()
            if response.status in _REDIRECTS or response.status >= 400:
                body = response.read(4096)
            else:
                body = self._read_all(response, deadline)
            if deadline.expired():
                raise deadline.error()
            return response.status, response.reason, response.getheader("Location"), body
        except (OSError, http.client.HTTPException) as exc:
            if deadline.expired():
                raise deadline.error() from None
            if isinstance(exc, OSError):
                raise
            raise PrometheusResponseError(f"not an HTTP answer ({exc.__class__.__name__})") from None
        finally:
            watchdog.cancel()
            conn.close()

    @staticmethod
    def _read_all(response: http.client.HTTPResponse, deadline: Deadline) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            if deadline.expired():
                raise deadline.error()
            # read1: what has arrived, so a server trickling bytes meets the deadline too
            chunk = response.read1(1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise PrometheusResponseError(
                    f"answer larger than {MAX_RESPONSE_BYTES >> 20} MiB; narrow the query")
            chunks.append(chunk)
        return b"".join(chunks)

    @staticmethod
    def _checked(status: int, reason: str, body: bytes) -> bytes:
        if status < 400:
            return body
        detail = ""
        try:
            doc = json.loads(body)
            detail = f": {clean(doc.get('errorType', ''))}: {clean(doc.get('error', ''))}"
        except (ValueError, AttributeError):
            pass
        if status in (401, 403):
            detail += " (check FLEET_TUI_PROM_TOKEN or FLEET_TUI_PROM_USER/PASSWORD)"
        raise PrometheusResponseError(f"HTTP {status} {reason}{detail}")

    def query_body(self, query: str, deadline: Deadline | None = None) -> bytes:
        """An instant query's raw answer."""
        return self.get("/api/v1/query", {"query": query, "timeout": self.promql_timeout},
                        post=True, deadline=deadline)

    def query_range_body(self, query: str, start: float, end: float, step_s: float,
                         deadline: Deadline | None = None) -> bytes:
        return self.get("/api/v1/query_range",
                        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                         "step": f"{step_s:g}", "timeout": self.promql_timeout}, post=True,
                        deadline=deadline)
