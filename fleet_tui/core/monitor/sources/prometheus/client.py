"""HTTP to a Prometheus server: credentials, TLS, a total deadline per request, a size cap."""

from __future__ import annotations

import base64
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from fleet_tui.core.monitor.sources.prometheus.parse import PrometheusResponseError

MAX_RESPONSE_BYTES = 512 << 20  # ~20x a 1,024-GPU fleet's answer; more means a runaway query


def redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        parts = parts._replace(netloc=host)
    return urllib.parse.urlunsplit(parts)


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
    (or user:pass in the URL). TLS certificates are verified unless ``verify_tls=False`` (or
    ``FLEET_TUI_PROM_INSECURE=1``); ``ca_file`` adds a CA bundle. The URL must already be checked
    (http/https with a host)."""

    def __init__(self, url: str, *, token: str | None = None,
                 basic_auth: tuple[str, str] | None = None, verify_tls: bool | None = None,
                 ca_file: str | None = None, timeout_s: float = 5.0,
                 env: Mapping[str, str] | None = None):
        env = os.environ if env is None else env
        parts = urllib.parse.urlsplit(url)
        if parts.username and basic_auth is None and token is None:
            basic_auth = (urllib.parse.unquote(parts.username),
                          urllib.parse.unquote(parts.password or ""))
        self.url = redact(url).rstrip("/")
        if token is None and basic_auth is None:
            token = env.get("FLEET_TUI_PROM_TOKEN") or None
            user = env.get("FLEET_TUI_PROM_USER")
            if token is None and user:
                basic_auth = (user, env.get("FLEET_TUI_PROM_PASSWORD", ""))
        self.auth_header: str | None = None
        if token:
            self.auth_header = f"Bearer {token}"
        elif basic_auth:
            raw = f"{basic_auth[0]}:{basic_auth[1]}".encode()
            self.auth_header = "Basic " + base64.b64encode(raw).decode("ascii")
        if verify_tls is None:
            verify_tls = env.get("FLEET_TUI_PROM_INSECURE", "").lower() not in ("1", "true", "yes")
        self.verify_tls = verify_tls
        self._ssl: ssl.SSLContext | None = None
        if parts.scheme == "https":
            self._ssl = ssl.create_default_context(cafile=ca_file)
            if not verify_tls:
                self._ssl.check_hostname = False
                self._ssl.verify_mode = ssl.CERT_NONE
        self.timeout_s = float(timeout_s)
        # PromQL durations take no fractions ("0.5s" is refused): milliseconds
        self.promql_timeout = f"{max(1, int(self.timeout_s * 1000))}ms"
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=self._ssl) if self._ssl else urllib.request.HTTPHandler(),
            urllib.request.ProxyHandler({}),  # a fleet's Prometheus is reached directly
        )

    def get(self, path: str, params: Mapping[str, str] | None = None, *, post: bool = False) -> bytes:
        """One request with a total deadline; raises OSError / PrometheusResponseError."""
        url = self.url + path
        data = None
        if params:
            encoded = urllib.parse.urlencode(params)
            if post:
                data = encoded.encode()
            else:
                url = f"{url}?{encoded}"
        request = urllib.request.Request(url, data=data, method="POST" if post else "GET")
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", "fleet-tui")
        if data is not None:
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
        if self.auth_header:
            request.add_header("Authorization", self.auth_header)
        deadline = time.monotonic() + self.timeout_s
        try:
            response = self._opener.open(request, timeout=self.timeout_s)
        except urllib.error.HTTPError as exc:
            body = exc.read(4096) if exc.fp else b""
            detail = ""
            try:
                doc = json.loads(body)
                detail = f": {doc.get('errorType', '')}: {doc.get('error', '')}"
            except ValueError:
                pass
            if exc.code in (401, 403):
                detail += " (check FLEET_TUI_PROM_TOKEN or FLEET_TUI_PROM_USER/PASSWORD)"
            raise PrometheusResponseError(f"HTTP {exc.code} {exc.reason}{detail}") from None
        with response:
            chunks: list[bytes] = []
            size = 0
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no complete answer within {self.timeout_s:g} s")
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

    def query_body(self, query: str) -> bytes:
        """An instant query's raw answer."""
        return self.get("/api/v1/query", {"query": query, "timeout": self.promql_timeout},
                        post=True)

    def query_range_body(self, query: str, start: float, end: float, step_s: float) -> bytes:
        return self.get("/api/v1/query_range",
                        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                         "step": f"{step_s:g}", "timeout": self.promql_timeout}, post=True)
