"""esbridge's cache directory: engines, nodes, models, embeddings, features and datasets live under it."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """esbridge's cache directory (``$ESBRIDGE_HOME`` or ``~/.cache/esbridge``)."""
    root = os.environ.get("ESBRIDGE_HOME")
    return Path(root) if root else Path.home() / ".cache" / "esbridge"
