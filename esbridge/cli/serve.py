"""``esbridge serve`` on the command line: the server of :mod:`esbridge.serve` started with its options."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from esbridge.cli.options import connection_options
from esbridge.errors import ConfigurationError

if TYPE_CHECKING:
    import argparse

    from esbridge.engine.connection import ConnectionOptions

__all__ = ["add_commands"]


def _cmd_serve(args: argparse.Namespace, options_of: Callable[[argparse.Namespace], ConnectionOptions]) -> int:
    from esbridge.engine.transports import require_client
    from esbridge.serve.config import ServeConfig, load_config
    from esbridge.serve.server import Server, serve

    require_client("aiohttp", "esbridge serve (pip install \"esbridge[serve]\")")
    if args.username is not None or args.api_key is not None:
        raise ConfigurationError("esbridge serve passes on each request's own credentials (its Authorization "
                                 "header) and holds none: leave out --username and --api-key")
    config = load_config(args.config) if args.config else ServeConfig()
    server = Server(options_of(args), config, max_concurrency=args.max_concurrency,
                    request_timeout=args.request_timeout, header_timeout=args.header_timeout,
                    read_only=args.read_only)
    asyncio.run(serve(server, args.host, args.port, shutdown_timeout=args.shutdown_timeout))
    return 0


def add_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                 connect: Callable[[argparse.Namespace], Any]) -> None:
    """Register ``serve`` on the ``esbridge`` parser (it connects itself, per request, with the options'
    connection settings and each caller's credentials: ``connect`` is not used)."""
    p = sub.add_parser(
        "serve", help="serve the engine's REST API, reranking the searches of the configured indices",
        description="An HTTP server that speaks the engine's REST API: every request goes to the cluster "
                    "unchanged, except the _search and _msearch requests of the indices --config names, which "
                    "esbridge answers in the engine's response shape, reranked. Each request's Authorization "
                    "header is passed on to the cluster; the server holds no credentials. Health at "
                    "/_esbridge/health, Prometheus metrics at /_esbridge/metrics (docs/serve.md).")
    p.add_argument("--config", help="JSON file naming the reranked indices and their settings (default: none, "
                                    "every request passes through)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9280, help="port to listen on (default 9280; 0: a free one)")
    p.add_argument("--max-concurrency", type=int, default=64,
                   help="requests answered at once; more wait their turn (default 64)")
    p.add_argument("--request-timeout", type=float, default=60.0,
                   help="seconds esbridge may take over a reranked search before answering 504 (default 60)")
    p.add_argument("--read-only", action="store_true",
                   help="answer 403 to writes, deletions and cluster administration (every method but GET and HEAD, "
                        "but the reads sent as POST: _search, _msearch, _count, _mget, _explain, ...) without "
                        "passing them on; by default everything passes through (docs/serve.md)")
    p.add_argument("--header-timeout", type=float, default=30.0,
                   help="seconds a client connection may take to send a request's line and headers, counted from "
                        "its opening or from the previous answer; then it is closed (default 30)")
    p.add_argument("--shutdown-timeout", type=float, default=30.0,
                   help="on SIGTERM or SIGINT, seconds the requests being answered may take to finish (default 30)")
    connection_args(p)
    p.set_defaults(func=lambda a: _cmd_serve(a, connection_options))
