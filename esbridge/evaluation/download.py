"""Download BEIR collections into esbridge's cache, verified and extracted atomically.

``fetch_beir("scifact")`` fetches ``<base>/scifact.zip`` (base: ``$ESBRIDGE_BEIR_URL``,
else BEIR's public location) into ``<cache_dir>/datasets/``:

1. the archive is streamed to a temporary file beside the cache, counting bytes
   against ``Content-Length`` (a short read is an error, not a short file);
2. its MD5 is checked against BEIR's published checksum when the name has one,
   the zip's directory and every member's CRC are checked, and the members a
   BEIR collection needs (``corpus.jsonl``, ``queries.jsonl``, ``qrels/*.tsv``)
   must be there, with no member escaping the target folder;
3. it is extracted into a temporary folder that is renamed into place only when
   complete, with a marker file recording the URL and checksums.

On any failure the temporary file and folder are removed, so the cache never
holds a half-written collection; a later call downloads again.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from esbridge.errors import DatasetError
from esbridge.home import cache_dir

__all__ = ["BEIR_BASE_URL", "BEIR_MD5", "ENV_BASE_URL", "datasets_dir", "fetch_beir", "verify_archive"]

#: BEIR's public download location.
BEIR_BASE_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"
#: Environment variable that overrides :data:`BEIR_BASE_URL` (a mirror, or a test server).
ENV_BASE_URL = "ESBRIDGE_BEIR_URL"
#: Name of the marker file written into a complete, verified collection folder.
MARKER = ".esbridge-download.json"

#: MD5 of each public BEIR archive, as published in BEIR's README (beir-cellar/beir, "Available Datasets").
BEIR_MD5: Mapping[str, str] = {
    "msmarco": "444067daf65d982533ea17ebd59501e4",
    "trec-covid": "ce62140cb23feb9becf6270d0d1fe6d1",
    "nfcorpus": "a89dba18a62ef92f7d323ec890a0d38d",
    "nq": "d4d3d2e48787a744b6f6e691ff534307",
    "hotpotqa": "f412724f78b0d91183a0e86805e16114",
    "fiqa": "17918ed23cd04fb15047f73e6c3bd9d9",
    "arguana": "8ad3e3c2a5867cdced806d6503f29b99",
    "webis-touche2020": "46f650ba5a527fc69e0a6521c5a23563",
    "cqadupstack": "4e41456d7df8ee7760a7f866133bda78",
    "quora": "18fb154900ba42a600f84b839c173167",
    "dbpedia-entity": "c2a39eb420a3164af735795df012ac2c",
    "scidocs": "38121350fc3a4d2f48850f6aff52e4a9",
    "fever": "5a818580227bfb4b35bb6fa46d9b6c03",
    "climate-fever": "8b66f0a9126c521bae2bde127b4dc99d",
    "scifact": "5f7d1de60b170fc8027bb7898e2efca1",
}

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_CHUNK = 1 << 16


def datasets_dir() -> Path:
    """``<esbridge cache>/datasets`` (``$ESBRIDGE_HOME/datasets`` or ``~/.cache/esbridge/datasets``)."""
    return cache_dir() / "datasets"


def _base_url(base_url: str | None) -> str:
    return (base_url or os.environ.get(ENV_BASE_URL) or BEIR_BASE_URL).rstrip("/")


def fetch_beir(name: str, *, base_url: str | None = None, cache: Path | None = None,
               progress: bool = False, timeout: float = 60.0,
               checksums: Mapping[str, str] | None = None) -> Path:
    """The folder of BEIR collection ``name``, downloading and verifying it on first use.

    Args:
        name: a BEIR dataset name, e.g. ``scifact`` (lowercase letters, digits, ``.-_``).
        base_url: where ``<name>.zip`` lives (default ``$ESBRIDGE_BEIR_URL``, else BEIR's).
        cache: the datasets folder (default :func:`datasets_dir`).
        checksums: expected MD5 per name (default :data:`BEIR_MD5`).

    Raises:
        DatasetError: the name is invalid, the download failed or was truncated, or
            the archive is not a valid BEIR collection; the cache is left as it was.
    """
    if not _NAME.match(name):
        raise DatasetError(
            f"{name!r} is neither an existing folder nor a BEIR dataset name (lowercase letters, "
            "digits, '.', '-' and '_', e.g. scifact)"
        )
    root = Path(cache) if cache is not None else datasets_dir()
    target = root / name
    if (target / MARKER).is_file() and (target / "corpus.jsonl").is_file():
        return target
    if target.exists():
        raise DatasetError(
            f"{target} exists but is not a complete download (no {MARKER}); remove that folder "
            "and run again"
        )
    root.mkdir(parents=True, exist_ok=True)
    url = f"{_base_url(base_url)}/{name}.zip"
    expected_md5 = (BEIR_MD5 if checksums is None else checksums).get(name)
    fd, part_name = tempfile.mkstemp(dir=root, prefix=f".{name}-", suffix=".zip.part")
    os.close(fd)
    part = Path(part_name)
    staging: Path | None = None
    try:
        md5, sha256, size = _download(url, part, timeout=timeout, progress=progress)
        if expected_md5 is not None and md5 != expected_md5:
            raise DatasetError(
                f"{url} has MD5 {md5}, BEIR publishes {expected_md5} for {name!r}: the download is "
                "corrupt or the mirror serves other content; run again, or point "
                f"{ENV_BASE_URL} at a mirror with the original archive"
            )
        members, prefix = verify_archive(part, source=url)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}-extract-"))
        with zipfile.ZipFile(part) as zf:
            for member in members:
                rel = PurePosixPath(member).relative_to(prefix) if prefix else PurePosixPath(member)
                dest = staging.joinpath(*rel.parts)
                dest.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(member) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out, _CHUNK)
        (staging / MARKER).write_text(json.dumps(
            {"name": name, "url": url, "md5": md5, "sha256": sha256, "bytes": size}, indent=2) + "\n")
        try:
            os.rename(staging, target)
        except OSError:
            if (target / MARKER).is_file():  # another process finished first
                return target
            raise
        staging = None
        return target
    finally:
        part.unlink(missing_ok=True)
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _download(url: str, dest: Path, *, timeout: float, progress: bool) -> tuple[str, str, int]:
    """Stream ``url`` into ``dest``; ``(md5, sha256, bytes)``.  A short body is an error."""
    from tqdm import tqdm

    request = urllib.request.Request(url, headers={"User-Agent": "esbridge"})
    try:
        resp = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        hint = " (no such BEIR dataset?)" if err.code == 404 else ""
        raise DatasetError(f"downloading {url} failed: HTTP {err.code} {err.reason}{hint}") from err
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise DatasetError(
            f"downloading {url} failed: {reason}; check the network, or set {ENV_BASE_URL} to a "
            "reachable mirror, or pass the path of a local BEIR folder"
        ) from err
    md5 = hashlib.md5(usedforsecurity=False)
    sha = hashlib.sha256()
    got = 0
    with resp:
        length_header = resp.headers.get("Content-Length")
        expected = int(length_header) if length_header and length_header.isdigit() else None
        bar = tqdm(total=expected, unit="B", unit_scale=True, desc=f"downloading {url.rsplit('/', 1)[-1]}",
                   disable=not progress, file=sys.stderr)
        try:
            with open(dest, "wb") as out:
                while True:
                    try:
                        block = resp.read(_CHUNK)
                    except (OSError, ValueError, http.client.HTTPException) as err:  # IncompleteRead, resets
                        raise DatasetError(
                            f"downloading {url} failed after {got} bytes: {err}; run again"
                        ) from err
                    if not block:
                        break
                    out.write(block)
                    md5.update(block)
                    sha.update(block)
                    got += len(block)
                    bar.update(len(block))
        finally:
            bar.close()
    if expected is not None and got != expected:
        raise DatasetError(
            f"download of {url} was truncated: received {got} of {expected} bytes "
            "(the connection closed early); run again"
        )
    if got == 0:
        raise DatasetError(f"{url} returned an empty body; check the URL")
    return md5.hexdigest(), sha.hexdigest(), got


def verify_archive(path: Path, *, source: str = "") -> tuple[list[str], str]:
    """Check a BEIR zip and return ``(members to extract, common top folder or "")``.

    Raises:
        DatasetError: not a zip, a member fails its CRC, a member would escape the
            target folder, or ``corpus.jsonl``, ``queries.jsonl`` or ``qrels/*.tsv``
            is missing.
    """
    where = source or str(path)
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
            names = [i.filename for i in zf.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as err:
        raise DatasetError(f"{where} is not a valid zip archive ({err}); run again to download it anew") from err
    except Exception as err:  # zlib.error and friends from a damaged member
        raise DatasetError(f"{where} is a damaged zip archive ({err}); run again to download it anew") from err
    if bad is not None:
        raise DatasetError(f"{where} is damaged: member {bad!r} fails its CRC check; run again")
    for n in names:
        p = PurePosixPath(n)
        if p.is_absolute() or ".." in p.parts or "\\" in n:
            raise DatasetError(f"{where} holds a member with an unsafe path {n!r}; refusing to extract it")
    tops = {PurePosixPath(n).parts[0] for n in names if len(PurePosixPath(n).parts) > 1}
    prefix = ""
    if "corpus.jsonl" not in names and len(tops) == 1:
        prefix = next(iter(tops))
    rel = {str(PurePosixPath(n).relative_to(prefix)) if prefix else n for n in names
           if not prefix or PurePosixPath(n).parts[0] == prefix}
    missing = [f for f in ("corpus.jsonl", "queries.jsonl") if f not in rel]
    if not any(r.startswith("qrels/") and r.endswith(".tsv") for r in rel):
        missing.append("qrels/<split>.tsv")
    if missing:
        raise DatasetError(f"{where} is not a BEIR collection: {', '.join(missing)} missing from the archive")
    members = [n for n in names if (not prefix or PurePosixPath(n).parts[0] == prefix)
               and not PurePosixPath(n).name.startswith("._") and "__MACOSX" not in n]
    return members, prefix
