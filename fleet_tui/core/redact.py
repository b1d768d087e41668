"""Secrets never shown: the one function every output and log line passes URLs and messages through.

A Prometheus URL may carry credentials (``http://user:password@host``) or a token in its query
(``?access_token=...``). ``redact_url`` drops the user information and masks the values of query
parameters whose names say they are secret; ``redact`` does that to every URL inside a message
(errors, status lines, the recorder's metadata). Tokens taken from the environment
(``FLEET_TUI_PROM_TOKEN``, ``FLEET_TUI_PROM_PASSWORD``) are only ever put in the Authorization
header, never in text, so there is nothing of theirs to mask.
"""

from __future__ import annotations

import re
import urllib.parse

MASK = "***"
# query parameter names that carry a secret (access_token, api_key, X-Amz-Signature, password...)
_SECRET_PARAM = re.compile(r"token|key|secret|pass|auth|sig|credential|session", re.IGNORECASE)
# a URL inside free text: scheme://, then up to whitespace or a quote/bracket that closes it
_URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()\[\]]+")


def redact_url(url: str) -> str:
    """``url`` without user information and with secret query values masked; other text as is."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # e.g. an unbalanced "[" in the host: mask everything after the scheme
        head, sep, _ = url.partition("://")
        return f"{head}{sep}{MASK}" if sep else url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = []
        for piece in query.split("&"):
            name, eq, value = piece.partition("=")
            if eq and value and _SECRET_PARAM.search(urllib.parse.unquote_plus(name)):
                value = MASK
            pairs.append(f"{name}{eq}{value}")
        query = "&".join(pairs)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


def redact(text: str) -> str:
    """Every URL in ``text`` through ``redact_url`` (messages, spec strings, log lines)."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


# a flag whose value is a secret; "tokens" (of text) and "--max-num-batched-tokens" are counts
_SECRET_FLAG = re.compile(r"password|passwd|secret|credential|api[-_]?key|(^|[-_])(token|pass|key|auth)$",
                          re.IGNORECASE)


def redact_words(words: list[str] | tuple[str, ...]) -> list[str]:
    """Command-line words as they may be shown back (an error naming flags no command takes):
    URLs through ``redact_url``, and the value of a flag whose name says it is secret
    (``--token X``, ``--password=X``; not ``--tokens``, a count) masked."""
    out: list[str] = []
    secret_next = False
    for word in words:
        if secret_next and not word.startswith("-"):
            out.append(MASK)
            secret_next = False
            continue
        secret_next = False
        if word.startswith("-"):
            name, eq, _value = word.partition("=")
            if _SECRET_FLAG.search(name.lstrip("-")):
                if eq:
                    word = f"{name}={MASK}"
                else:
                    secret_next = True
        out.append(redact(word))
    return out
