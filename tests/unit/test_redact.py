"""Credentials never survive redact_uri / redact_text; everything else does, byte for byte."""

from __future__ import annotations

import pytest

from chunkmill import ids
from chunkmill.redact import is_secret_parameter, redact_text, redact_uri, redact_uris

SECRET = "SENTINELsecret42"


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        # userinfo: dropped whole, password or token alike
        (f"https://user:{SECRET}@host/a/b.md", "https://host/a/b.md"),
        (f"https://{SECRET}@github.com/o/r/raw/x.md", "https://github.com/o/r/raw/x.md"),
        (f"s3://AKIA:{SECRET}@bucket/k.txt", "s3://bucket/k.txt"),
        (f"https://u:{SECRET}@host:8443?x=1", "https://host:8443?x=1"),
        # AWS SigV4 presigned
        (
            f"https://b.s3.amazonaws.com/d/a.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            f"&X-Amz-Credential=AKIA%2F{SECRET}&X-Amz-Date=20260101T000000Z&X-Amz-Expires=900"
            f"&X-Amz-SignedHeaders=host&X-Amz-Security-Token={SECRET}"
            f"&X-Amz-Signature={SECRET}&versionId=v7",
            "https://b.s3.amazonaws.com/d/a.pdf?X-Amz-Algorithm=***&X-Amz-Credential=***"
            "&X-Amz-Date=***&X-Amz-Expires=***&X-Amz-SignedHeaders=***"
            "&X-Amz-Security-Token=***&X-Amz-Signature=***&versionId=v7",
        ),
        # GCS V4 and V2 signed URLs
        (
            f"https://storage.googleapis.com/b/o.md?x-goog-signature={SECRET}"
            f"&X-Goog-Credential={SECRET}&generation=12",
            "https://storage.googleapis.com/b/o.md?x-goog-signature=***"
            "&X-Goog-Credential=***&generation=12",
        ),
        (
            f"https://storage.googleapis.com/b/o?GoogleAccessId=sa&Expires=1&Signature={SECRET}",
            "https://storage.googleapis.com/b/o?GoogleAccessId=***&Expires=***&Signature=***",
        ),
        # Azure SAS
        (
            f"https://acct.blob.core.windows.net/c/d.txt?sv=2022-11-02&sp=r&se=2026-01-01"
            f"&sig={SECRET}",
            "https://acct.blob.core.windows.net/c/d.txt?sv=***&sp=***&se=***&sig=***",
        ),
        # generic names, any case, percent-encoded names, and in the fragment
        (f"https://h/p?token={SECRET}&page=2", "https://h/p?token=***&page=2"),
        (f"https://h/p?ACCESS_TOKEN={SECRET}", "https://h/p?ACCESS_TOKEN=***"),
        (f"https://h/p?x-oss-security-token={SECRET}", "https://h/p?x-oss-security-token=***"),
        (f"https://h/p?sessionToken={SECRET}", "https://h/p?sessionToken=***"),
        (f"https://h/p?%73ig={SECRET}", "https://h/p?%73ig=***"),
        (f"https://h/p#access_token={SECRET}&state=s", "https://h/p#access_token=***&state=s"),
        # nothing to redact: unchanged
        ("https://host/a/b.md?page=2&lang=en#top", "https://host/a/b.md?page=2&lang=en#top"),
        ("gs://bucket/dir/file.md", "gs://bucket/dir/file.md"),
        ("https://host/user@example.com/file.md", "https://host/user@example.com/file.md"),
        ("https://h/p?flag&token", "https://h/p?flag&token"),
        # a local path: "?" and "@" are part of a file name
        (f"/data/a?token={SECRET}.md", f"/data/a?token={SECRET}.md"),
        (f"/data/me:{SECRET}@home.md", f"/data/me:{SECRET}@home.md"),
    ],
)
def test_redact_uri(uri, expected):
    assert redact_uri(uri) == expected
    assert redact_uri(expected) == expected  # idempotent


def test_rotated_signature_is_the_same_document():
    def signed(signature: str, date: str) -> str:
        return (
            "https://b.s3.amazonaws.com/a.pdf?X-Amz-Date="
            f"{date}&X-Amz-Signature={signature}&X-Amz-Credential=AKIA%2F{date}"
        )

    first, rotated = signed("aaa", "20260101T000000Z"), signed("bbb", "20260102T000000Z")
    assert ids.doc_id(redact_uri(first)) == ids.doc_id(redact_uri(rotated))
    assert redact_uri("https://b.s3.amazonaws.com/a.pdf") != redact_uri(
        "https://b.s3.amazonaws.com/b.pdf"
    )


@pytest.mark.parametrize(
    "name",
    ["X-Amz-Signature", "sig", "SIG", "Signature", "token", "security-token", "client_secret"],
)
def test_secret_parameter_names(name):
    assert is_secret_parameter(name)


@pytest.mark.parametrize("name", ["versionId", "generation", "alt", "page", "prefix", "format"])
def test_object_selecting_parameters_are_kept(name):
    assert not is_secret_parameter(name)


def test_redact_text_redacts_every_uri_in_a_message():
    message = (
        f"HTTPError: 403 for 'https://u:{SECRET}@h/a.md?sig={SECRET}' "
        f"(retried https://h/b.md?X-Amz-Signature={SECRET}): no such key /data/x?token=ok.md"
    )
    out = redact_text(message)
    assert SECRET not in out
    assert "'https://h/a.md?sig=***'" in out
    assert "https://h/b.md?X-Amz-Signature=***)" in out
    assert out.endswith("/data/x?token=ok.md")


def test_redact_uris_is_redact_uri_of_each():
    local = ["/data/a?b@c.md", "/data/d.md"]
    assert redact_uris(local) is local  # no "://": nothing to redact, nothing copied
    mixed = [*local, f"https://u:{SECRET}@host/x.md", "gs://b/k.md"]
    assert redact_uris(mixed) == [redact_uri(u) for u in mixed]


def test_doc_ids_are_doc_id_of_each():
    uris = ["/data/a.md", "gs://b/ké.md", ""]
    assert ids.doc_ids_joined(uris) == "".join(ids.doc_id(u) for u in uris)
    assert ids.doc_ids_joined([]) == ""


def test_redact_uris_finds_a_scheme_in_any_uri_of_many():
    uris = [f"/data/{i}:/" for i in range(1000)] + ["/x", f"https://u:{SECRET}@h/k.md"]
    assert redact_uris(uris)[-1] == "https://h/k.md"
    assert redact_uris(uris[:-1]) is uris[:-1] or redact_uris(uris[:-1]) == uris[:-1]
