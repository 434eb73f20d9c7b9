"""The embedding store: the vectors of chunk hashes, content-addressed per model key.

    OUTPUT/embeddings/KEY/model.json                    what KEY is (written before any vector)
    OUTPUT/embeddings/KEY/part-SET-SHA.parquet          chunk_hash, vector (float32 x dim)
    OUTPUT/embeddings/KEY/_EMBEDDING                    the claim of the embed writing to KEY
    OUTPUT/embeddings/KEY/damaged/part-*.parquet        files that failed their check, set aside

A hash is embedded once per key. An embed works under the key's claim (``claim``: created
only if absent, in one atomic request on local disk, GCS and S3), so two embeds of one key
never write at once; the second refuses in one line naming the first. The holder renews its
claim every minute; a claim not renewed for 15 minutes, or made on this machine by a process
that is gone (a killed embed), is taken over.

Vectors are committed as they are made, a file per group of hashes, each written whole
(under a temporary name, then renamed): a killed embed keeps the files it finished and the
next one embeds only the rest. A file's name is fixed by what it holds: ``SET`` is a digest
of its sorted hashes, so a retried group writes the same name again (and removes a copy of
the same group under another ``SHA``), never a second copy of a hash. ``SHA`` is the start of
the SHA-256 of the file's bytes: every read checks it (and the Parquet page checksums), and
a file that fails is ``StoreDamaged``, one line naming it and the command that mends it
(``chunkmill embed`` moves it aside into ``damaged/`` and embeds its chunks again).
``model.json`` carries the SHA-256 of its other fields, checked on read the same way.
Files of older releases (``part-RUN-BATCH-NNNNN.parquet``) are checked by their page
checksums alone.

Files are read through Beam's FileSystems, so the store may live on local disk, gs:// or
s3://, beside the runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from chunkmill import stores
from chunkmill.transforms import lease, parquet_io, runstate

EMBEDDINGS = "embeddings"
MODEL_INFO = "model.json"
PART_PREFIX = "part-"
CLAIM = "_EMBEDDING"
DAMAGED = "damaged"
# part-SET-SHA.parquet: SET a digest of the file's sorted hashes, SHA of its bytes.
_CHECKED_NAME = re.compile(r"part-(?P<set>[0-9a-f]{32})-(?P<sha>[0-9a-f]{32})\.parquet")


class StoreDamaged(Exception):
    """A vector file fails its check (its bytes are not those written, or it is not the
    Parquet file it was): the message is one line naming the file, its model and the
    command that mends it. ``path`` is the file."""

    def __init__(self, line: str, path: str = "") -> None:
        super().__init__(line)
        self.path = path

    def __reduce__(self):  # rebuilt from its line when a runner pickles it
        return (type(self), (str(self), self.path))


class EmbedBusy(Exception):
    """Another embed holds the key's claim: one line naming the model, the claim and the
    way forward."""


def store_dir(output: str, key: str) -> str:
    return FileSystems.join(output, EMBEDDINGS, key)


def vector_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("chunk_hash", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dimension), nullable=False),
        ]
    )


def write_model_info(output: str, key: str, info: dict[str, Any]) -> None:
    """Records what ``key`` is, once: an existing record is left as it is."""
    path = FileSystems.join(store_dir(output, key), MODEL_INFO)
    if FileSystems.exists(path):
        return
    runstate.write_whole(path, _model_json(key, info))


def replace_model_info(output: str, key: str, info: dict[str, Any]) -> None:
    """Records what ``key`` is, over an existing record (a damaged one, or one written by a
    release that misread the model: the key is the model's files, so its record is what the
    model says)."""
    runstate.write_whole(
        FileSystems.join(store_dir(output, key), MODEL_INFO), _model_json(key, info)
    )


# model.json carries the SHA-256 of its other fields (sorted JSON) under this name.
_INFO_SHA = "sha256"


def _model_json(key: str, info: dict[str, Any]) -> bytes:
    body = {"key": key, **info}
    return json.dumps({**body, _INFO_SHA: _info_sha(body)}, sort_keys=True, indent=1).encode()


def _info_sha(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def read_model_info(output: str, key: str) -> dict[str, Any] | None:
    """What ``key`` is, or None when the store holds no vector of it. ``StoreDamaged`` when
    ``model.json`` is not what was written (not JSON, another key, a SHA that does not
    match; records of older releases have none)."""
    path = FileSystems.join(store_dir(output, key), MODEL_INFO)
    if not FileSystems.exists(path):
        return None
    try:
        info = json.loads(runstate.read_text(path))
        body = {k: v for k, v in info.items() if k != _INFO_SHA}
        sound = body.get("key") == key and info.get(_INFO_SHA, _info_sha(body)) == _info_sha(body)
    except (ValueError, AttributeError):  # not UTF-8, not JSON, not an object
        sound = False
    if not sound:
        raise StoreDamaged(
            f"damaged {path} (what model key {key} is): it is not what was written; "
            f"`chunkmill embed --output {output}` with that model writes it again",
            path,
        )
    return body


def label(output: str, key: str) -> str:
    """``model NAME (key KEY)``, as messages name a key: by the model it is, from
    ``model.json``, and by the key itself."""
    try:
        name = (read_model_info(output, key) or {}).get("model")
    except Exception:  # an unreadable model.json must not hide the message that names it
        name = None
    return f"model {name} (key {key})" if name else f"key {key}"


def part_paths(output: str, key: str) -> list[str]:
    """Every vector file of ``key``, sorted."""
    pattern = FileSystems.join(store_dir(output, key), f"{PART_PREFIX}*.parquet")
    return sorted(m.path for m in _match(pattern))


def _match(pattern: str) -> list[Any]:
    try:
        return list(FileSystems.match([pattern])[0].metadata_list)
    except Exception:  # Beam raises for a pattern whose folder does not exist yet
        if FileSystems.exists(pattern.rsplit("/", 1)[0]):
            raise
        return []


# ---------------------------------------------------------------------------------------------
# Reading, checked


def read_part(output: str, key: str, path: str, columns: list[str] | None = None) -> pa.Table:
    """One vector file, checked whole: the SHA-256 its name records (older files: none) and
    the Parquet page checksums. ``StoreDamaged`` when it fails; errors of the store itself
    (permission, network) propagate as they are."""
    data = runstate.read_bytes(path)
    name = path.rsplit("/", 1)[-1]
    named = _CHECKED_NAME.fullmatch(name)
    if named and _sha(data) != named["sha"]:
        raise damaged(output, key, path, "its bytes do not match the checksum in its name")
    try:
        # A file without a SHA is checked by every page's checksum: all columns are read.
        reader = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True)
        wanted = columns or ["chunk_hash", "vector"]
        table = reader.read(columns=wanted if named else None).select(wanted)
    except (OSError, KeyError, pa.ArrowException) as e:
        raise damaged(output, key, path, " ".join(str(e).split())) from e
    return table


def damaged(output: str, key: str, path: str, why: str) -> StoreDamaged:
    """The one line of a damaged vector file: which, of which model, and the remedy."""
    remedy = f"chunkmill embed --output {output}"
    info = _model_info_or_none(output, key)
    name = (info or {}).get("model")
    if name and name != "all-minilm-l6-v2":
        remedy += f" --model <the folder of {name}>"
    return StoreDamaged(
        f"damaged vector file {path} of {label(output, key)}: {why}; `{remedy}` moves it "
        f"aside and embeds its chunks again",
        path,
    )


def _model_info_or_none(output: str, key: str) -> dict[str, Any] | None:
    try:
        return read_model_info(output, key)
    except Exception:
        return None


@dataclass(frozen=True)
class Scan:
    """What the store holds for a key, every file checked."""

    hashes: pa.Array  # the distinct hashes of the files that passed
    damaged: list[str]  # the files that failed their check


def scan(output: str, key: str) -> Scan:
    """Reads and checks every vector file of ``key`` (``read_part``)."""
    found: list[pa.Array] = []
    bad: list[str] = []
    for path in part_paths(output, key):
        try:
            found += read_part(output, key, path, ["chunk_hash"])["chunk_hash"].chunks
        except StoreDamaged:
            bad.append(path)
    return Scan(pc.unique(pa.chunked_array(found, pa.string())), bad)


def stored_hashes(output: str, key: str) -> pa.Array:
    """The distinct hashes the store holds a vector of for ``key``; ``StoreDamaged`` when a
    file fails its check."""
    found = scan(output, key)
    if found.damaged:
        raise damaged(output, key, found.damaged[0], "it fails its checksum")
    return found.hashes


def read_vectors(
    output: str, key: str, hashes: pa.Array | pa.ChunkedArray | None = None
) -> Iterator[pa.Table]:
    """``(chunk_hash, vector)`` batches of ``key``'s vectors, only those of ``hashes`` when
    given, each file checked (``StoreDamaged``). A hash comes once from the files this
    release writes; files of two embeds of older releases may both hold it (same vector)."""
    for path in part_paths(output, key):
        t = read_part(output, key, path)
        if hashes is not None:
            t = t.filter(pc.is_in(t["chunk_hash"], value_set=hashes))
        for batch in t.to_batches(max_chunksize=parquet_io.PARQUET_BATCH_ROWS):
            if batch.num_rows:
                yield pa.Table.from_batches([batch])


# ---------------------------------------------------------------------------------------------
# Writing


def part_name(run_id: str, batch: str, index: int) -> str:
    """The ``index``-th vector file that one embed of ``run_id`` (``batch``) stored (the
    names of older releases; ``write_vectors`` names files by what they hold)."""
    return f"{PART_PREFIX}{run_id}-{batch}-{index:05d}.parquet"


def write_part(output: str, key: str, name: str, table: pa.Table) -> str:
    """Writes one vector file whole under ``name``; returns its path."""
    path = FileSystems.join(store_dir(output, key), name)
    runstate.write_whole(path, _parquet_bytes(table))
    return path


def set_digest(hashes: list[str]) -> str:
    """The ``SET`` of a vector file's name: a digest of the hashes it holds, in any order."""
    return hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()[:32]


def write_vectors(output: str, key: str, table: pa.Table) -> str:
    """Commits ``table`` (``vector_schema``) to the store as one file, written whole and
    named ``part-SET-SHA.parquet`` (see the module docstring); returns its path. Writing the
    same hashes again (a retried group) replaces the file: a copy of the group under another
    ``SHA`` is removed once this one is in place."""
    table = table.sort_by("chunk_hash")
    group = set_digest(table["chunk_hash"].to_pylist())
    data = _parquet_bytes(table)
    path = FileSystems.join(store_dir(output, key), f"{PART_PREFIX}{group}-{_sha(data)}.parquet")
    runstate.write_whole(path, data)
    copies = _match(FileSystems.join(store_dir(output, key), f"{PART_PREFIX}{group}-*.parquet"))
    _delete([m.path for m in copies if m.path != path])
    return path


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, write_page_checksum=True)
    return bytes(sink.getvalue().to_pybytes())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _delete(paths: list[str]) -> None:
    for path in paths:
        try:
            FileSystems.delete([path])
        except Exception:  # gone already: another attempt removed it
            if FileSystems.exists(path):
                raise


def set_aside(output: str, key: str, path: str) -> str:
    """Moves a damaged vector file into ``KEY/damaged/`` (kept for inspection, never read);
    returns where it went."""
    target = FileSystems.join(store_dir(output, key), DAMAGED, path.rsplit("/", 1)[-1])
    if FileSystems.exists(target):
        target = f"{target}.{uuid.uuid4().hex[:8]}"
    if stores.is_local(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
    FileSystems.rename([path], [target])
    return target


def tidy(output: str, key: str) -> None:
    """Removes what a killed embed left in the store: temporary files, and the extra copies
    of a group written twice (a retry killed between its rename and its clean-up; the copy
    that passes its check is kept). Only under the key's claim: nothing else writes then."""
    root = store_dir(output, key)
    leftovers = [m.path for m in _match(FileSystems.join(root, f"{PART_PREFIX}*.tmp"))]
    for name in (MODEL_INFO, CLAIM):
        leftovers += [m.path for m in _match(FileSystems.join(root, f"{name}.*.tmp"))]
    groups: dict[str, list[str]] = {}
    for path in part_paths(output, key):
        named = _CHECKED_NAME.fullmatch(path.rsplit("/", 1)[-1])
        if named is not None:
            groups.setdefault(named["set"], []).append(path)
    for copies in groups.values():
        if len(copies) > 1:
            sound = [p for p in copies if _passes(output, key, p)]
            leftovers += [p for p in copies if p not in sound[:1]] if sound else []
    _delete(leftovers)


def _passes(output: str, key: str, path: str) -> bool:
    try:
        read_part(output, key, path, ["chunk_hash"])
    except StoreDamaged:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# The claim of the embed writing to a key


# A claim is a lease (chunkmill.transforms.lease): renewed every RENEW_SECONDS while its embed
# runs, taken over once not renewed for LEASE_SECONDS or its process is gone.
RENEW_SECONDS = lease.RENEW_SECONDS
LEASE_SECONDS = lease.LEASE_SECONDS
Claim = lease.Lease


def claim(output: str, key: str, model_name: str, run_id: str) -> Claim:
    """Takes the claim of ``key`` for this process (see the module docstring); ``EmbedBusy``
    when another embed holds it. Hold it with ``holding``."""
    path = FileSystems.join(store_dir(output, key), CLAIM)
    try:
        return lease.take(path, model=model_name, run_id=run_id)
    except lease.Held as held:
        raise EmbedBusy(
            f"another embed of model {model_name} (key {key}) is running ({held.who()}, "
            f"claim {path}); wait for it to end (a claim not renewed for "
            f"{LEASE_SECONDS // 60} minutes is taken over), or delete that file if that embed "
            "is no longer running"
        ) from None


def holding(held: Claim, every: float = RENEW_SECONDS) -> AbstractContextManager[Claim]:
    """Holds ``held`` while the block runs: renewed every ``every`` seconds, released at the
    end."""
    return lease.holding(held, every, name="embed-claim")


release = lease.release
