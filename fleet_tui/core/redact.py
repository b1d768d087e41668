"""Secrets never shown: the one place every output and log line passes URLs and messages through.

A Prometheus URL may carry credentials (``http://user:password@host``) or a token in its query
(``?access_token=...``). A spec is split once, by ``split_url``, into a ``SecretUrl``: the URL
without its user information (what requests go to), the display form (also with secret query
values masked) and the credentials, kept apart. The user information ends at the *last* ``@``
before the host, so a password holding ``/ # ? ( ' " < space tab`` is still the password (a
parser that stops at the first ``/`` would read part of it as the host and quote it in an error).

``redact`` masks every URL's credentials inside a message, every ``user:password@`` written
without a scheme, and every secret seen so far (``remember`` is called by ``split_url`` and, for
each command-line word, by the CLI): a message built from the raw spec by mistake still shows
``***``. Tokens taken from the environment (``FLEET_TUI_PROM_TOKEN``, ``FLEET_TUI_PROM_PASSWORD``)
go only into the Authorization header and are remembered as well.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field

MASK = "***"
# query parameter names that carry a secret (access_token, api_key, X-Amz-Signature, password...)
_SECRET_PARAM = re.compile(r"token|key|secret|pass|auth|sig|credential|session", re.IGNORECASE)
# a URL inside free text: scheme://, then up to whitespace or a quote/bracket that closes it
_URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()\[\]]+")
# "user:password@host" without a scheme (a spec typed without http://): the user information
_USERINFO_IN_TEXT = re.compile(r"(?<![\w.%+-])[\w.%+-]+:[^\s@/]*@(?=[\w\[])")
# secrets shorter than this are not masked in free text (every "ab" of a message would go)
_MIN_REMEMBERED = 4
# source kinds whose spec is PATH[@SPEED]: the part before "@" is a file name, not user information
_PATH_AT_SPEED_KINDS = frozenset({"replay", "fleet-replay"})

_secrets: set[str] = set()
_secrets_lock = threading.Lock()


def remember(secret: str | None) -> None:
    """Mask ``secret`` (and its percent-encoded and -decoded forms) in every later ``redact``."""
    if not secret or len(secret) < _MIN_REMEMBERED:
        return
    forms = {secret, urllib.parse.unquote(secret), urllib.parse.quote(secret, safe=""),
             urllib.parse.quote(secret)}
    # as repr() and JSON show it (an error quoting the value with !r, a JSON field)
    forms |= {repr(f)[1:-1] for f in list(forms)} | {json.dumps(f)[1:-1] for f in list(forms)}
    forms |= {f.lower() for f in forms}  # a value a command folds to lower case (--cloud)
    with _secrets_lock:
        _secrets.update(f for f in forms if len(f) >= _MIN_REMEMBERED)


def forget_all() -> None:
    """Tests only: start again with no remembered secret."""
    with _secrets_lock:
        _secrets.clear()


@dataclass(frozen=True, slots=True)
class SecretUrl:
    """A URL split once: ``url`` without user information (for requests), ``display`` (also with
    secret query values masked: for every message), and the credentials, never in ``repr``."""

    url: str
    display: str
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)


def _split_userinfo(url: str) -> tuple[str, str | None]:
    """``url`` without its user information, and that information (``None`` when there is none).
    The user information is everything between ``://`` and the last ``@`` (see module doc)."""
    head, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url, None
    userinfo, _, host_and_path = rest.rpartition("@")
    return f"{head}{sep}{host_and_path}", userinfo


def split_url(url: str) -> SecretUrl:
    """``url`` split into a ``SecretUrl``; its secrets are remembered (see ``remember``)."""
    clean, userinfo = _split_userinfo(url)
    username = password = None
    if userinfo is not None:
        user, colon, pw = userinfo.partition(":")
        username = urllib.parse.unquote(user)
        password = urllib.parse.unquote(pw) if colon else None
        remember(userinfo)
        remember(pw if colon else user)
        remember(password)
    return SecretUrl(clean, _mask_query(clean), username, password)


def _mask_query(url: str) -> str:
    """``url`` (no user information) with the values of secret query parameters masked."""
    base, q, rest = url.partition("?")
    if not q:
        return url
    query, hash_sign, fragment = rest.partition("#")
    pairs = []
    for piece in query.split("&"):
        name, eq, value = piece.partition("=")
        if eq and value and _SECRET_PARAM.search(urllib.parse.unquote_plus(name)):
            remember(value)
            value = MASK
        pairs.append(f"{name}{eq}{value}")
    return f"{base}?{'&'.join(pairs)}{hash_sign}{fragment}"


def redact_url(url: str) -> str:
    """``url`` without user information and with secret query values masked; other text as is."""
    return split_url(url).display


def redact_spec(spec: str) -> str:
    """A ``--source`` spec as it may be shown, from its structure (not a pattern in text):
    ``kind:URL`` with the URL split by ``split_url`` (user information up to the last ``@``
    dropped, whatever characters it holds), and user information typed without a scheme
    (``prometheus:user:pw@host``) masked; then ``redact`` for anything remembered."""
    kind, colon, rest = spec.partition(":")
    if colon and "://" in rest:
        return redact(f"{kind}:{split_url(rest.strip()).display}")
    if colon and "@" in rest and kind.lower() not in _PATH_AT_SPEED_KINDS:  # PATH@SPEED: no secret
        userinfo, _, host = rest.rpartition("@")
        remember(userinfo)
        return redact(f"{kind}:{MASK}@{host}")
    return redact(spec)


def _mask_remembered(text: str) -> str:
    with _secrets_lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def _mask_userinfo(m: re.Match[str]) -> str:
    kind, _, rest = m.group(0).partition(":")
    if ":" in rest:  # kind:user:password@ -> kind:***@ ("prometheus:" of a spec stays)
        return f"{kind}:{MASK}@"
    if rest == MASK + "@" or kind.lower() in _PATH_AT_SPEED_KINDS:  # masked already; PATH@SPEED
        return m.group(0)
    return f"{MASK}@"


def redact(text: str) -> str:
    """``text`` with every URL through ``redact_url``, user information without a scheme masked,
    and every remembered secret masked (messages, spec strings, log lines, tracebacks)."""
    text = str(text)
    if _secrets:
        text = _mask_remembered(text)
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    if "@" in text:
        text = _USERINFO_IN_TEXT.sub(_mask_userinfo, text)
    return text


def remember_words(words: list[str] | tuple[str, ...]) -> None:
    """Remember the secrets of command-line words: user information of a URL or spec in any word,
    secret query values, and the values of flags whose names say they are secret."""
    for word in words:
        if "@" in word or "?" in word:
            text = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
            for start in (m.start() for m in re.finditer(r"[a-zA-Z][a-zA-Z0-9+.-]*://", text)):
                split_url(text[start:])
            if "://" not in text and "@" in text:  # prometheus:user:pw@host
                _, _, tail = text.partition(":")
                userinfo = tail.rpartition("@")[0]
                remember(userinfo)
                remember(userinfo.partition(":")[2])
    for name, value in zip(words, list(words[1:]) + [""]):
        flag, eq, inline = name.partition("=")
        if flag.startswith("--") and _SECRET_FLAG.search(flag.lstrip("-")):
            remember(inline if eq else value)


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
