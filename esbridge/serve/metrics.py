"""The Prometheus metrics of ``esbridge serve`` (``/_esbridge/metrics``)."""

from __future__ import annotations

__all__ = ["Metrics", "BUCKETS"]

#: Upper bounds (seconds) of the latency histogram's buckets.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """Counters and a latency histogram per handling (``reranked``, ``unreranked``,
    ``passed_through``, ``esbridge``), and the searches of reranked indices answered unreranked by
    reason (:data:`esbridge.serve.search.REASONS`), in Prometheus' text format (:meth:`render`)."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.buckets: dict[str, list[int]] = {}
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.in_flight = 0
        self.unreranked_searches: dict[str, int] = {}

    def unreranked(self, reason: str, n: int = 1) -> None:
        """Count ``n`` searches of reranked indices the engine answered unreranked, for ``reason``."""
        self.unreranked_searches[reason] = self.unreranked_searches.get(reason, 0) + n

    def observe(self, handling: str, status: int, seconds: float) -> None:
        self.requests[(handling, status)] = self.requests.get((handling, status), 0) + 1
        counts = self.buckets.setdefault(handling, [0] * len(BUCKETS))
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                counts[i] += 1
        self.sums[handling] = self.sums.get(handling, 0.0) + seconds
        self.counts[handling] = self.counts.get(handling, 0) + 1

    def render(self) -> str:
        lines = ["# HELP esbridge_serve_requests_total Requests answered, by handling and HTTP status.",
                 "# TYPE esbridge_serve_requests_total counter"]
        for (handling, status), n in sorted(self.requests.items()):
            lines.append(f'esbridge_serve_requests_total{{handling="{handling}",status="{status}"}} {n}')
        lines += ["# HELP esbridge_serve_request_duration_seconds Time to answer a request, by handling.",
                  "# TYPE esbridge_serve_request_duration_seconds histogram"]
        for handling in sorted(self.counts):
            for bound, n in zip(BUCKETS, self.buckets[handling]):
                lines.append(f'esbridge_serve_request_duration_seconds_bucket{{handling="{handling}",'
                             f'le="{bound}"}} {n}')
            lines.append(f'esbridge_serve_request_duration_seconds_bucket{{handling="{handling}",le="+Inf"}} '
                         f'{self.counts[handling]}')
            lines.append(f'esbridge_serve_request_duration_seconds_sum{{handling="{handling}"}} '
                         f'{self.sums[handling]:.6f}')
            lines.append(f'esbridge_serve_request_duration_seconds_count{{handling="{handling}"}} '
                         f'{self.counts[handling]}')
        lines += ["# HELP esbridge_serve_unreranked_total Searches of reranked indices answered by the engine "
                  "unreranked, by reason.", "# TYPE esbridge_serve_unreranked_total counter"]
        for reason, n in sorted(self.unreranked_searches.items()):
            lines.append(f'esbridge_serve_unreranked_total{{reason="{reason}"}} {n}')
        lines += ["# HELP esbridge_serve_in_flight Requests being answered.", "# TYPE esbridge_serve_in_flight gauge",
                  f"esbridge_serve_in_flight {self.in_flight}"]
        return "\n".join(lines) + "\n"
