"""Readers racing a writer: the harness the cache tests share."""

from __future__ import annotations

import threading
from collections.abc import Callable


def race(read: Callable[[int], None], write: Callable[[int], None], *, readers: int, reads: int) -> list[str]:
    """Run ``readers`` threads calling ``read(i)`` ``reads`` times while one thread calls
    ``write(i)`` until they are done; the failures, as ``"Type: message"``."""
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            for i in range(reads):
                read(i)
        except BaseException as err:  # noqa: BLE001 - every failure is a finding
            errors.append(err)

    def writer() -> None:
        i = 0
        while not stop.is_set():
            write(i)
            i += 1

    w = threading.Thread(target=writer)
    rs = [threading.Thread(target=reader) for _ in range(readers)]
    w.start()
    for t in rs:
        t.start()
    for t in rs:
        t.join()
    stop.set()
    w.join()
    return [f"{type(e).__name__}: {e}" for e in errors]
