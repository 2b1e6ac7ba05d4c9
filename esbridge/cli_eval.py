"""``esbridge eval`` and ``esbridge tune`` (being written)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register the evaluation commands on the ``esbridge`` parser."""
