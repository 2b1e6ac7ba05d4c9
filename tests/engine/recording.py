"""What a test's engine client sent: every request's method, path and body, while installed."""

from __future__ import annotations

import json
from typing import Any

from esbridge.engine.client import Engine


class Recorder:
    """The requests ``engine`` sends inside ``with Recorder(engine) as rec:``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.calls: list[tuple[str, str, Any]] = []
        self._request = engine.request

    def __enter__(self) -> Recorder:
        def request(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
            self.calls.append((method, path, kwargs.get("body")))
            return self._request(method, path, *args, **kwargs)

        self.engine.request = request  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.engine.request

    @property
    def paths(self) -> list[str]:
        """Each request's path, in order."""
        return [path for _, path, _ in self.calls]

    @property
    def vectors(self) -> bool:
        """Whether some request asked for candidates' term vectors (not only statistics)."""
        return any(path.endswith("/_mtermvectors") and isinstance(body, dict)
                   and any("_id" in d for d in body.get("docs", ())) for _, path, body in self.calls)

    @property
    def searches(self) -> list[dict[str, Any]]:
        """The bodies of the ``_search`` requests."""
        return [body for _, path, body in self.calls if path.endswith("/_search") and isinstance(body, dict)]

    @property
    def msearches(self) -> list[dict[str, Any]]:
        """The searches of the ``_msearch`` requests (their body lines, headers left out)."""
        return [json.loads(line) for _, path, body in self.calls
                if path.endswith("/_msearch") and isinstance(body, str) for line in body.splitlines()[1::2]]
