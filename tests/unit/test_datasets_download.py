"""BEIR downloads against a local HTTP server (127.0.0.1 only): success, reuse, and the
failures that must leave no half-written cache behind."""

from __future__ import annotations

import hashlib
import http.server
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from esbridge.evaluation.datasets import DatasetError, load_dataset
from esbridge.evaluation.download import ENV_BASE_URL, MARKER, fetch_beir, verify_archive
from tests.data import documents, judged_queries, qrels, write_beir

#: The name the test server serves the collection under (not one of BEIR's, so no published MD5 applies).
NAME = "tiny"
N_QUERIES = 6


def _collection(folder: Path) -> Path:
    """A small BEIR collection: the first 60 abstracts of the shipped sample and 6 judged claims."""
    if not (folder / "corpus.jsonl").is_file():
        queries = judged_queries(limit=N_QUERIES)
        judged = qrels()
        write_beir(folder, documents(60), {q["_id"]: q["text"] for q in queries},
                   {"test": {q["_id"]: judged[q["_id"]] for q in queries}})
    return folder


def _beir_zip(path: Path, top: str = NAME, skip: tuple[str, ...] = ()) -> bytes:
    """A BEIR-format zip of :func:`_collection`, as BEIR ships them (one top folder)."""
    src = _collection(path.parent / "source")
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for rel in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
            if rel not in skip:
                zf.write(src / rel, f"{top}/{rel}")
    return path.read_bytes()


class _Server:
    """Serves ``routes[path] = (body, declared_length)`` and counts requests."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[bytes, int]] = {}
        self.requests: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                server.requests.append(self.path)
                if self.path not in server.routes:
                    self.send_error(404, "not found")
                    return
                body, length = server.routes[self.path]
                self.send_response(200)
                self.send_header("Content-Type", "application/zip")
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.close()


@pytest.fixture
def good_zip(tmp_path: Path) -> bytes:
    return _beir_zip(tmp_path / f"{NAME}.zip")


def _leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_download_verifies_extracts_and_reuses(server: _Server, good_zip: bytes, tmp_path: Path) -> None:
    server.routes[f"/{NAME}.zip"] = (good_zip, len(good_zip))
    cache = tmp_path / "cache"
    folder = fetch_beir(NAME, base_url=server.url, cache=cache, progress=False,
                        checksums={NAME: hashlib.md5(good_zip).hexdigest()})
    assert folder == cache / NAME
    src = _collection(tmp_path / "source")
    for rel in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        assert (folder / rel).read_bytes() == (src / rel).read_bytes()
    assert (folder / MARKER).is_file()
    assert _leftovers(cache) == [NAME]  # no temporary file or folder left
    # the second call reuses the cache without a request
    assert fetch_beir(NAME, base_url=server.url, cache=cache, progress=False) == folder
    assert server.requests == [f"/{NAME}.zip"]


def test_load_dataset_by_name_uses_the_env_url(server: _Server, good_zip: bytes, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    server.routes[f"/{NAME}.zip"] = (good_zip, len(good_zip))
    monkeypatch.setenv(ENV_BASE_URL, server.url + "/")
    monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path / "home"))
    ds = load_dataset(NAME, progress=False)
    assert ds.path == tmp_path / "home" / "datasets" / NAME
    assert ds.name == NAME
    assert len(ds.queries("test")) == N_QUERIES


def test_truncated_download_fails_and_leaves_no_cache(server: _Server, good_zip: bytes, tmp_path: Path) -> None:
    server.routes[f"/{NAME}.zip"] = (good_zip[: len(good_zip) // 2], len(good_zip))
    cache = tmp_path / "cache"
    with pytest.raises(DatasetError, match=r"truncated: received \d+ of \d+ bytes.*run again"):
        fetch_beir(NAME, base_url=server.url, cache=cache, progress=False)
    assert _leftovers(cache) == []
    # once the server is fixed, a new call succeeds
    server.routes[f"/{NAME}.zip"] = (good_zip, len(good_zip))
    assert (fetch_beir(NAME, base_url=server.url, cache=cache, progress=False) / "corpus.jsonl").is_file()


def test_corrupt_zip_fails_and_leaves_no_cache(server: _Server, tmp_path: Path) -> None:
    body = b"PK\x03\x04 this is not really a zip archive" * 100
    server.routes[f"/{NAME}.zip"] = (body, len(body))
    cache = tmp_path / "cache"
    with pytest.raises(DatasetError, match="not a valid zip archive"):
        fetch_beir(NAME, base_url=server.url, cache=cache, progress=False)
    assert _leftovers(cache) == []


def test_damaged_member_fails_its_crc(server: _Server, good_zip: bytes, tmp_path: Path) -> None:
    # flip bytes inside the first member's compressed data: the directory is intact, the CRC is not
    damaged = bytearray(good_zip)
    for i in range(200, 260):
        damaged[i] ^= 0xFF
    server.routes[f"/{NAME}.zip"] = (bytes(damaged), len(damaged))
    cache = tmp_path / "cache"
    with pytest.raises(DatasetError, match="damaged|not a valid zip"):
        fetch_beir(NAME, base_url=server.url, cache=cache, progress=False)
    assert _leftovers(cache) == []


def test_checksum_mismatch_is_reported(server: _Server, good_zip: bytes, tmp_path: Path) -> None:
    server.routes[f"/{NAME}.zip"] = (good_zip, len(good_zip))
    cache = tmp_path / "cache"
    with pytest.raises(DatasetError, match="MD5"):
        fetch_beir(NAME, base_url=server.url, cache=cache, progress=False, checksums={NAME: "0" * 32})
    assert _leftovers(cache) == []


def test_archive_without_corpus_is_rejected(server: _Server, tmp_path: Path) -> None:
    body = _beir_zip(tmp_path / "bad.zip", skip=("corpus.jsonl",))
    server.routes[f"/{NAME}.zip"] = (body, len(body))
    cache = tmp_path / "cache"
    with pytest.raises(DatasetError, match="corpus.jsonl missing"):
        fetch_beir(NAME, base_url=server.url, cache=cache, progress=False)
    assert _leftovers(cache) == []


def test_missing_dataset_is_a_clear_404(server: _Server, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="HTTP 404.*no such BEIR dataset"):
        fetch_beir("nosuch", base_url=server.url, cache=tmp_path / "cache", progress=False)


def test_unreachable_server_says_what_to_do(tmp_path: Path) -> None:
    s = _Server()
    url = s.url
    s.close()  # nothing listens there any more
    with pytest.raises(DatasetError, match=ENV_BASE_URL):
        fetch_beir(NAME, base_url=url, cache=tmp_path / "cache", progress=False, timeout=5)


def test_invalid_names_and_unsafe_members(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="neither an existing folder nor a BEIR dataset name"):
        fetch_beir("../etc", cache=tmp_path)
    bad = tmp_path / "evil.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr(f"{NAME}/corpus.jsonl", "{}\n")
        zf.writestr(f"{NAME}/queries.jsonl", "{}\n")
        zf.writestr(f"{NAME}/qrels/test.tsv", "q\td\t1\n")
        zf.writestr("../escape.txt", "x")
    with pytest.raises(DatasetError, match="unsafe path"):
        verify_archive(bad)


def test_a_half_written_folder_is_not_trusted(tmp_path: Path) -> None:
    (tmp_path / NAME).mkdir()
    with pytest.raises(DatasetError, match="not a complete download"):
        fetch_beir(NAME, base_url="http://127.0.0.1:9", cache=tmp_path, progress=False)


def test_archive_at_the_root_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "flat.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("corpus.jsonl", "{}\n")
        zf.writestr("queries.jsonl", "{}\n")
        zf.writestr("qrels/test.tsv", "q\td\t1\n")
    members, prefix = verify_archive(path)
    assert prefix == ""
    assert sorted(members) == ["corpus.jsonl", "qrels/test.tsv", "queries.jsonl"]
