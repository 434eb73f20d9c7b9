"""Credentials out of every URI chunkmill writes or logs.

An input may be a signed URL (``https://host/key?X-Amz-Signature=...``, an Azure SAS, a GCS
signed URL) or carry a password (``https://user:password@host/...``). The real URI is what a
document is read from; ``redact_uri`` gives what it is known by: its ``source_uri`` column,
its ``doc_id`` (a hash of that), error messages, ``_SUCCESS``, the run summary, the HTML
report and log lines. A re-signed URL of the same object therefore names the same document.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import unquote

MASK = "***"

# Query (and fragment) parameters whose value is redacted, compared case-insensitively. They
# are the signing parameters of presigned URLs: secret (signatures, credentials, tokens) or
# rotated with every signature (dates, expiry, permissions), so neither belongs in a
# document's identity. Parameters that select an object (versionId, generation, alt) are kept.
SECRET_PARAMETERS = frozenset(
    {
        # AWS SigV4 presigned URLs (and SigV2: AWSAccessKeyId, Signature, Expires)
        "x-amz-algorithm",
        "x-amz-credential",
        "x-amz-date",
        "x-amz-expires",
        "x-amz-security-token",
        "x-amz-signature",
        "x-amz-signedheaders",
        "awsaccesskeyid",
        "expires",
        # Google Cloud Storage signed URLs (V4 and V2: GoogleAccessId, Signature, Expires)
        "x-goog-algorithm",
        "x-goog-credential",
        "x-goog-date",
        "x-goog-expires",
        "x-goog-signature",
        "x-goog-signedheaders",
        "googleaccessid",
        # Azure shared access signatures
        "sig",
        "se",
        "st",
        "sp",
        "sv",
        "skoid",
        "sktid",
        "skt",
        "ske",
        "sks",
        "skv",
        "saoid",
        "suoid",
        "scid",
        # CloudFront signed URLs
        "policy",
        "key-pair-id",
        # Alibaba OSS
        "ossaccesskeyid",
        # generic
        "signature",
        "token",
        "access_token",
        "id_token",
        "refresh_token",
        "code",
        "key",
        "apikey",
        "api_key",
        "password",
        "secret",
        "client_secret",
        "auth",
        "authorization",
    }
)
# Any other parameter whose name says it holds a secret (security-token, sessionToken...).
_SECRET_NAME = re.compile(
    r"token|secret|signature|credential|passw|api[-_]?key|access[-_]?key", re.IGNORECASE
)
# A URI inside free text (an exception's message): a scheme, "://", then up to a space or a
# quote.
_URI_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def is_secret_parameter(name: str) -> bool:
    """True when a query parameter called ``name`` (percent-encoded or not) holds a secret or
    a signature's validity window."""
    name = unquote(name)
    return name.lower() in SECRET_PARAMETERS or bool(_SECRET_NAME.search(name))


def redact_uri(uri: str) -> str:
    """``uri`` without credentials: userinfo (``user:password@``) dropped whole (a user name
    alone can be a token, as in ``https://TOKEN@host/``), and the values of secret query and
    fragment parameters (``is_secret_parameter``) replaced with ``***``. The scheme, host,
    path, other parameters and their order are kept byte for byte.

    A path without ``://`` (a local file) is returned unchanged: its ``?`` and ``@`` are part
    of a file name. Idempotent: ``redact_uri(redact_uri(u)) == redact_uri(u)``.
    """
    scheme_end = uri.find("://")
    if scheme_end <= 0 or not any(c in uri for c in "@?#"):
        return uri  # the common case: nothing to redact
    start = scheme_end + 3
    authority_end = len(uri)
    for stop in "/?#":
        i = uri.find(stop, start)
        if i != -1:
            authority_end = min(authority_end, i)
    authority = uri[start:authority_end]
    at = authority.rfind("@")
    if at != -1:
        authority = authority[at + 1 :]
    rest = uri[authority_end:]
    path, hash_, fragment = rest.partition("#")
    path, question, query = path.partition("?")
    if question:
        query = _redact_parameters(query)
    if hash_:
        fragment = _redact_parameters(fragment)
    return f"{uri[:start]}{authority}{path}{question}{query}{hash_}{fragment}"


def redact_uris(uris: Sequence[str]) -> Sequence[str]:
    """``redact_uri`` of each of ``uris``: ``uris`` itself when none holds ``://`` (local
    paths, returned unchanged one by one too)."""
    if "://" not in "\n".join(uris):  # one search; no URI spans the line breaks
        return uris
    return [redact_uri(uri) for uri in uris]


def redact_text(text: str) -> str:
    """``text`` with every URI in it redacted (``redact_uri``): for messages, such as an
    exception's, that may quote a signed URL."""
    if "://" not in text:
        return text
    return _URI_IN_TEXT.sub(_redact_match, text)


def _redact_match(match: re.Match[str]) -> str:
    # Punctuation that ends a sentence or closes a bracket around the URI is not part of it.
    uri = match.group(0)
    body = uri.rstrip(").,;:]}")
    return redact_uri(body) + uri[len(body) :]


def _redact_parameters(query: str) -> str:
    if "=" not in query:
        return query
    parts = []
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        parts.append(f"{name}={MASK}" if eq and value and is_secret_parameter(name) else pair)
    return "&".join(parts)
