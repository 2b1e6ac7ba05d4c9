"""The on-disk feature store: round trips, versions, restarts, threads and processes."""

from __future__ import annotations

import multiprocessing
import random
import threading
from pathlib import Path

import numpy as np
import pytest

from esbridge.errors import ConfigurationError
from esbridge.features.cache import TermVectorCache
from esbridge.features.diskstore import DiskVectorStore
from esbridge.features.termvectors import (
    CandidateVectors,
    FetchResult,
    FieldStats,
    FieldVector,
    QueryChannel,
    TermMatrix,
    build_input,
)
from esbridge.index import IndexLayout
from esbridge.scoring.arrays import ScoringInput

ID = "docs:9f2c"


def _doc(seed: int) -> dict[str, FieldVector]:
    rng = random.Random(seed)
    words = [f"w{rng.randrange(400)}" for _ in range(rng.randrange(0, 40))]
    base: dict[str, int] = {}
    for w in words:
        base[w] = base.get(w, 0) + 1
    prefix = {w[:2]: tf for w, tf in base.items()}
    # a length that is not the sum of the tfs (tokens stacked at one position)
    return {"all.base": FieldVector(base, length=len(words) + seed % 3), "all.prefix": FieldVector(prefix)}


def test_round_trip_keeps_terms_tfs_and_lengths(tmp_path: Path) -> None:
    store = DiskVectorStore(tmp_path)
    docs = {f"d{i}": _doc(i) for i in range(50)}
    store.put_many(ID, [((d, i, 1), v) for i, (d, v) in enumerate(docs.items())])
    got = store.get_many(ID, [(d, i, 1) for i, d in enumerate(docs)], ["all.base", "all.prefix"])
    for (_d, want), entry in zip(docs.items(), got, strict=True):
        assert entry is not None
        for sf in ("all.base", "all.prefix"):
            assert dict(entry[sf]) == dict(want[sf])
            assert entry[sf].length == want[sf].length


def test_other_version_or_missing_subfield_is_a_miss(tmp_path: Path) -> None:
    store = DiskVectorStore(tmp_path)
    store.put_many(ID, [(("a", 5, 1), {"all.base": FieldVector({"x": 2})})])
    assert store.get_many(ID, [("a", 5, 1)], ["all.base"])[0] == {"all.base": {"x": 2}}
    assert store.get_many(ID, [("a", 6, 1)], ["all.base"]) == [None]  # updated since
    assert store.get_many(ID, [("a", 5, 2)], ["all.base"]) == [None]  # another primary term
    assert store.get_many(ID, [("a", 5, 1)], ["all.base", "all.prefix"]) == [None]
    assert store.get_many("docs:other-uuid", [("a", 5, 1)], ["all.base"]) == [None]
    # the refetched version replaces the row
    store.put_many(ID, [(("a", 6, 1), {"all.base": FieldVector({"y": 1})})])
    assert store.get_many(ID, [("a", 6, 1)], ["all.base"])[0] == {"all.base": {"y": 1}}
    assert store.get_many(ID, [("a", 5, 1)], ["all.base"]) == [None]
    assert store.part(ID).holds([("a", 6, 1), ("a", 5, 1), ("b", 6, 1)], ["all.base"]) == [True, False, False]


def test_survives_a_restart(tmp_path: Path) -> None:
    first = DiskVectorStore(tmp_path)
    first.put_many(ID, [(("a", 1, 1), _doc(1)), (("b", 2, 1), _doc(2))])
    part = first.part(ID)
    part.close()  # closes every thread's connection; the next use opens new ones
    assert part.get_many([("a", 1, 1)], ["all.base"])[0] is not None
    first.close()
    again = DiskVectorStore(tmp_path)
    got = again.get_many(ID, [("b", 2, 1), ("a", 1, 1)], ["all.base"])
    assert got[0] is not None and dict(got[0]["all.base"]) == dict(_doc(2)["all.base"])
    assert got[1] is not None and dict(got[1]["all.base"]) == dict(_doc(1)["all.base"])
    size = again.part(ID).size()
    assert size.documents == 2 and size.rows == 4 and size.bytes > 0


def test_cache_reads_through_to_disk_and_writes_back(tmp_path: Path) -> None:
    cache = TermVectorCache(max_entries=10, disk=tmp_path)
    key = (ID, "a", 3, 1)
    assert cache.get(key, ["all.base"]) is None
    cache.put(key, _doc(3), ["all.base", "all.prefix"])
    fresh = TermVectorCache(max_entries=10, disk=DiskVectorStore(tmp_path))  # another process, say
    entry = fresh.get(key, ["all.prefix"])
    assert entry is not None and dict(entry["all.prefix"]) == dict(_doc(3)["all.prefix"])
    assert fresh.counts().disk_hits == 1
    assert fresh.get(key, ["all.prefix"]) is not None  # now from memory
    assert fresh.counts().disk_hits == 1 and fresh.counts().hits == 2


def test_a_read_for_some_terms_holds_those_terms_and_the_whole_fields_sizes(tmp_path: Path) -> None:
    store = DiskVectorStore(tmp_path)
    docs = {f"d{i}": _doc(i) for i in range(60)}
    keys = [(d, i, 1) for i, d in enumerate(docs)]
    store.put_many(ID, list(zip(keys, docs.values(), strict=True)))
    # "w1"-style terms in the base sub-field, two-letter prefixes in the prefix one; "w3" is
    # asked of the prefix sub-field too, where no document has it; "zz" is in no document
    terms = {"all.base": ("w1", "w3", "w17", "w250", "zz"), "all.prefix": ("w3", "w1", "w2")}
    sfs = ["all.base", "all.prefix"]
    # d7 asked at another version (a miss); a new process knows no terms
    asked = [k if k[0] != "d7" else ("d7", 99, 1) for k in keys]
    rows, matrices = DiskVectorStore(tmp_path).read_terms(ID, asked, sfs, terms)
    assert rows.tolist() == [i for i, k in enumerate(asked) if k[0] != "d7"]
    matched = 0
    for sf in sfs:
        m = matrices[sf]
        assert m.terms == terms[sf] and m.tf.shape == (len(rows), len(terms[sf]))
        assert m.rows.tolist() == rows.tolist()
        for k, pos in enumerate(rows.tolist()):
            want = docs[keys[pos][0]][sf]
            assert m.tf[k].tolist() == [want.get(t, 0) for t in terms[sf]], (pos, sf)
            assert (m.length[k], m.distinct[k]) == (want.length, len(want))
        matched += int((m.tf > 0).sum())
    assert matched > 20  # the terms are common enough for the check to mean something
    # versions still decide: another _seq_no is a miss
    rows, matrices = store.read_terms(ID, [("d1", 9, 1)], sfs, terms)
    assert len(rows) == 0 and matrices["all.base"].tf.shape == (0, 5)


def test_a_read_for_some_terms_is_not_kept_in_memory(tmp_path: Path) -> None:
    key = (ID, "a", 3, 1)
    TermVectorCache(max_entries=10, disk=tmp_path).put(key, _doc(3), ["all.base", "all.prefix"])
    cache = TermVectorCache(max_entries=10, disk=DiskVectorStore(tmp_path))
    some = tuple(sorted(_doc(3)["all.base"])[:2])
    missing = (ID, "b", 1, 1)
    got, from_disk, matrices = cache.read_terms([missing, key], ["all.base"], {"all.base": some})
    assert got == [None, None] and from_disk.tolist() == [1]
    assert matrices["all.base"].rows.tolist() == [1]
    assert matrices["all.base"].tf.tolist() == [[_doc(3)["all.base"][t] for t in some]]
    assert cache.counts().size == 0  # memory keeps whole vectors only
    assert (cache.hits, cache.misses, cache.disk_hits) == (1, 1, 1)
    whole = cache.get(key, ["all.base"])  # a read for every term is kept
    assert whole is not None and dict(whole["all.base"]) == dict(_doc(3)["all.base"])
    assert cache.counts().size == 1
    # with a disk store, a read for some terms is the store's (what memory holds, it holds too)
    got, from_disk, matrices = cache.read_terms([key], ["all.base"], {"all.base": some})
    assert got == [None] and from_disk.tolist() == [0] and matrices["all.base"].tf.shape == (1, 2)
    # without one, memory answers with the whole vector, whatever terms are asked
    memory = TermVectorCache(max_entries=10)
    memory.put(key, _doc(3), ["all.base"])
    got, from_disk, matrices = memory.read_terms([key, missing], ["all.base"], {"all.base": some})
    assert got[0] is not None and dict(got[0]["all.base"]) == dict(_doc(3)["all.base"]) and got[1] is None
    assert len(from_disk) == 0 and "all.base" not in matrices


def test_concurrent_readers_and_writer_see_whole_documents(tmp_path: Path) -> None:
    store = DiskVectorStore(tmp_path)
    store.put_many(ID, [((f"d{i}", 1, 1), _doc(i)) for i in range(100)])
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            for round_ in range(2, 30):
                store.put_many(ID, [((f"d{i}", round_, 1), _doc(i + 1000 * round_)) for i in range(0, 100, 7)])
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)
        finally:
            stop.set()

    def reader() -> None:
        try:
            while not stop.is_set():
                keys = [(f"d{i}", 1, 1) for i in range(100) if i % 7]
                for (d, _, _), entry in zip(keys, store.get_many(ID, keys, ["all.base", "all.prefix"]), strict=True):
                    i = int(d[1:])
                    assert entry is not None
                    assert dict(entry["all.base"]) == dict(_doc(i)["all.base"])
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=reader) for _ in range(4)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    last = store.get_many(ID, [("d7", 29, 1)], ["all.base"])[0]
    assert last is not None and dict(last["all.base"]) == dict(_doc(7 + 29000)["all.base"])


def _write_range(root: str, start: int, stop: int) -> None:
    store = DiskVectorStore(root)
    for i in range(start, stop, 5):
        store.put_many(ID, [((f"d{j}", 1, 1), _doc(j)) for j in range(i, min(i + 5, stop))])


def test_several_processes_write_one_store(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_range, args=(str(tmp_path), k * 60, (k + 1) * 60)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = DiskVectorStore(tmp_path)
    got = store.get_many(ID, [(f"d{j}", 1, 1) for j in range(180)], ["all.base", "all.prefix"])
    for j, entry in enumerate(got):
        assert entry is not None, j
        assert dict(entry["all.base"]) == dict(_doc(j)["all.base"])
        assert dict(entry["all.prefix"]) == dict(_doc(j)["all.prefix"])


def test_unwritable_folder_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigurationError, match="feature store folder"):
        DiskVectorStore(blocker).part(ID)


def test_engine_time_values_read_as_seconds() -> None:
    from esbridge.errors import ConfigurationError
    from esbridge.features.cache import StatsCache
    from esbridge.index.facts import parse_time_value

    assert [parse_time_value(v) for v in ("1s", "500ms", "2m", "1h", "-1", " 30S ", "1500micros")] == \
        pytest.approx([1.0, 0.5, 120.0, 3600.0, 0.0, 30.0, 0.0015])
    for bad in ("fast", "1x", "-2s", ""):
        with pytest.raises(ConfigurationError, match="not a time value"):
            parse_time_value(bad)
    for bad_interval in (-1, float("nan"), float("inf"), True):
        with pytest.raises(ConfigurationError, match="refresh_interval"):
            StatsCache(None, "i", refresh_interval=bad_interval)  # type: ignore[arg-type]


def test_the_scorer_input_is_the_same_from_arrays_and_whole_vectors(tmp_path: Path) -> None:
    """Candidates read as arrays for the query's terms, whole vectors, and a mix of both
    (memory holds some candidates, the disk store the others) give the scorer the same input."""
    layout = IndexLayout()
    sfs = [layout.subfield(layout.combined, ch) for ch in ("base", "prefix")]
    docs = [{sfs[0]: _doc(i)["all.base"], sfs[1]: _doc(i)["all.prefix"]} for i in range(40)]
    keys = [(f"d{i}", 1, 1) for i in range(40)]
    store = DiskVectorStore(tmp_path)
    store.put_many(ID, list(zip(keys, docs, strict=True)))
    query = {"base": QueryChannel(("w1", "w7", "w33", "nothing"), (1, 2, 1, 1)),
             "prefix": QueryChannel(("w1", "w3"), (1, 1))}
    stats = {layout.subfield(layout.combined, ch): FieldStats(doc_count=40, sum_ttf=800, df={t: 3 for t in qc.terms})
             for ch, qc in query.items()}
    terms = {sfs[0]: query["base"].terms, sfs[1]: query["prefix"].terms}
    ids = tuple(k[0] for k in keys)

    def scored(vectors: list[dict[str, FieldVector]], matrices: dict[str, TermMatrix]) -> ScoringInput:
        cands = CandidateVectors(ids=ids, vectors=tuple(vectors), found=(True,) * len(keys), matrices=matrices)
        return build_input(FetchResult(cands, stats, 0), layout, query, fields=[layout.combined])

    whole = scored([g or {} for g in store.get_many(ID, keys, sfs)], {})
    rows, matrices = store.read_terms(ID, keys, sfs, terms)
    assert rows.tolist() == list(range(40))
    arrays = scored([{} for _ in keys], matrices)
    odd = [k for k in range(1, 40, 2)]  # every other candidate from arrays, the rest whole
    half_rows, half = store.read_terms(ID, [keys[k] for k in odd], sfs, terms)
    mixed = scored([{} if k % 2 else docs[k] for k in range(40)],
                   {sf: m.moved(np.array(odd)) for sf, m in half.items()})
    for other in (arrays, mixed):
        for ch in query:
            a, b = whole.channels[ch], other.channels[ch]
            assert a.tf.sum() > 0
            np.testing.assert_array_equal(a.tf, b.tf)
            np.testing.assert_array_equal(a.doc_len, b.doc_len)
            assert a.unique_terms is not None and b.unique_terms is not None
            np.testing.assert_array_equal(a.unique_terms, b.unique_terms)
    cands = CandidateVectors(ids=ids, vectors=tuple({} for _ in keys), found=(True,) * len(keys),
                             matrices=matrices)
    both = {layout.subfield(f, ch): stats[layout.subfield(layout.combined, ch)]
            for f in (layout.combined, "title") for ch in query}
    with pytest.raises(ValueError, match="one query's terms"):  # distinct terms cannot be added up from arrays
        build_input(FetchResult(cands, both, 0), layout, query, fields=[layout.combined, "title"])
    # ... which no scorer but one reads: without them, the rest is built
    built = build_input(FetchResult(cands, both, 0), layout, query, fields=[layout.combined, "title"],
                        distinct=False)
    assert all(c.unique_terms is None and c.tf.sum() > 0 for c in built.channels.values())


def test_arrays_of_every_candidate_are_the_scorers_own_copy_and_a_repeated_term_fills_its_columns() -> None:
    """Every candidate read as a matrix of the query's terms (the engine plugin's answer) gives the
    scorer copies of its arrays; a term the query names twice takes the other path and fills both
    of its columns."""
    layout = IndexLayout()
    sf = layout.subfield(layout.combined, "base")
    tf = np.array([[1.0, 0.0], [2.0, 3.0], [0.0, 1.0]])
    matrix = TermMatrix(rows=np.arange(3), terms=("a", "b"), tf=tf.copy(), length=np.array([5.0, 6.0, 7.0]),
                        distinct=np.array([4.0, 5.0, 6.0]))
    cands = CandidateVectors(ids=("x", "y", "z"), vectors=({}, {}, {}), found=(True,) * 3, matrices={sf: matrix})
    stats = {sf: FieldStats(doc_count=10, sum_ttf=60, df={"a": 2, "b": 3})}
    got = build_input(FetchResult(cands, stats, 0), layout, {"base": QueryChannel(("a", "b"), (1, 1))},
                      fields=[layout.combined]).channels["base"]
    np.testing.assert_array_equal(got.tf, tf)
    np.testing.assert_array_equal(got.doc_len, [5.0, 6.0, 7.0])
    assert got.unique_terms is not None
    np.testing.assert_array_equal(got.unique_terms, [4.0, 5.0, 6.0])
    got.tf[:] = 0.0
    got.doc_len[:] = 0.0
    np.testing.assert_array_equal(matrix.tf, tf)  # the matrix is untouched
    np.testing.assert_array_equal(matrix.length, [5.0, 6.0, 7.0])
    twice = build_input(FetchResult(cands, stats, 0), layout, {"base": QueryChannel(("b", "a", "b"), (1, 1, 1))},
                        fields=[layout.combined]).channels["base"]
    np.testing.assert_array_equal(twice.tf, tf[:, [1, 0, 1]])


def test_rows_a_reader_remembers_never_serve_another_version(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader keeps the rows it has read; a document another process (here: another store
    object on the folder) has written since is read again at the hit's version, and a bound of
    a few rows changes nothing but how often SQLite is asked."""
    import esbridge.features.diskstore as diskstore

    reader, writer = DiskVectorStore(tmp_path), DiskVectorStore(tmp_path)
    writer.put_many(ID, [((f"d{i}", 1, 1), _doc(i)) for i in range(20)])
    keys = [(f"d{i}", 1, 1) for i in range(20)]
    assert all(e is not None for e in reader.get_many(ID, keys, ["all.base", "all.prefix"]))
    assert len(reader.part(ID)._known[("all.base", "all.prefix")]) == 20  # remembered
    # d3 is updated elsewhere: its new version is read from the store, never the remembered row
    writer.put_many(ID, [(("d3", 2, 1), {"all.base": FieldVector({"fresh": 4}, length=4),
                                         "all.prefix": FieldVector({"fr": 4})})])
    got = reader.get_many(ID, [("d3", 2, 1)], ["all.base", "all.prefix"])[0]
    assert got is not None and dict(got["all.base"]) == {"fresh": 4} and got["all.base"].length == 4
    # a version neither row holds is a miss, as before
    assert reader.get_many(ID, [("d3", 3, 1), ("d4", 1, 2)], ["all.base"]) == [None, None]
    monkeypatch.setattr(diskstore, "ROW_CACHE", 3)
    small = DiskVectorStore(tmp_path)
    for _ in range(2):
        got_all = small.get_many(ID, keys, ["all.base", "all.prefix"])
        for i, entry in enumerate(got_all):
            if i == 3:
                assert entry is None  # stored at version 2 now
                continue
            assert entry is not None, (i, _)
            assert dict(entry["all.base"]) == dict(_doc(i)["all.base"])
        assert sum(len(k) for k in small.part(ID)._known.values()) <= 20


def test_blocks_are_stored_in_term_order_and_every_asked_term_is_found(tmp_path: Path) -> None:
    """Each block's pairs are written in increasing term id (what the binary search of a read
    for some terms relies on), and such a read finds every asked term a block holds — first,
    last, middle — in blocks of 0 to 300 terms written in several batches, so that term ids
    are not in the order of any one document's terms."""
    rng = random.Random(7)
    store = DiskVectorStore(tmp_path)
    docs: dict[str, dict[str, FieldVector]] = {}
    for batch in range(4):
        entries = []
        for i in range(batch * 30, batch * 30 + 30):
            n = rng.choice([0, 1, 2, 5, 40, 300])
            base = {f"t{rng.randrange(2000)}": rng.randrange(1, 9) for _ in range(n)}
            other = {f"o{rng.randrange(50)}": 1 for _ in range(rng.randrange(0, 6))}
            docs[f"d{i}"] = {"all.base": FieldVector(base), "all.prefix": FieldVector(other)}
            entries.append(((f"d{i}", 1, 1), docs[f"d{i}"]))
        store.put_many(ID, entries)
    part = store.part(ID)
    pairs = part._pairs(10**9)
    keys = [(d, 1, 1) for d in docs]
    hits, blocks = part._locate(keys, ["all.base", "all.prefix"])
    assert hits == list(range(len(keys)))
    for start, count, _ in blocks.reshape(-1, 3).tolist():
        block = pairs[start:start + count, 0]
        assert (np.diff(block) > 0).all()
    for trial in range(20):
        asked_base = set(rng.sample(sorted({t for v in docs.values() for t in v["all.base"]}), 15))
        asked_base |= {"t-missing", "o1"}  # a term in no document, and one of the other sub-field
        # every block's smallest and largest term too, the ends of the binary search
        for v in rng.sample(list(docs.values()), 5):
            if v["all.base"]:
                ordered = sorted(v["all.base"], key=lambda t: part._ids[t])
                asked_base |= {ordered[0], ordered[-1]}
        terms = {"all.base": tuple(sorted(asked_base)), "all.prefix": ("o1", "o2", "o3", "t1")}
        reader = DiskVectorStore(tmp_path) if trial % 2 else store  # a new process knows no terms
        rows, matrices = reader.read_terms(ID, keys, ["all.base", "all.prefix"], terms)
        assert rows.tolist() == list(range(len(keys)))
        for k, want in enumerate(docs.values()):
            for sf in ("all.base", "all.prefix"):
                m = matrices[sf]
                assert m.tf[k].tolist() == [want[sf].get(t, 0) for t in terms[sf]], (k, sf)
                assert m.distinct[k] == len(want[sf])
