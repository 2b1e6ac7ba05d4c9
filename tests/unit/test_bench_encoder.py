"""``benchmarks/bench_encoder.py``'s table of forward-pass limits."""

from __future__ import annotations

from tests.scripts import benchmark_script


def test_the_limits_table_gives_each_speed_its_ratio_to_the_former_batching() -> None:
    be = benchmark_script("bench_encoder")
    assert be.BATCHINGS[0] == (16, None)
    assert (be.BATCH_SIZE, be.BATCH_TOKENS) in be.BATCHINGS  # the defaults are among the limits timed
    at = be.BATCHINGS.index((be.BATCH_SIZE, be.BATCH_TOKENS))
    n = len(be.BATCHINGS)
    whole = [10.0] * n
    whole[at] = 14.0
    passages = [100.0] * n
    passages[at] = 97.0
    rows = [("m1", "documents/s, whole", whole), ("m1", "passages/s, 64 word pieces", passages),
            ("m2", "documents/s, whole", [20.0] * n), ("m2", "passages/s, 64 word pieces", [200.0] * n)]
    text = "\n".join(be.batching_table(rows))
    assert "| 16 texts (any length) (former) |" in text
    assert "| m1 | documents/s, whole | 10.0 |" in text and "14.0 (1.40x)" in text and "97.0 (0.97x)" in text
    assert (f"The encoder's defaults ({be.limit(be.BATCHINGS[at])} per pass) against the former batching: "
            "1.00x–1.40x in documents/s, 0.97x–1.00x in passages/s.") in text
