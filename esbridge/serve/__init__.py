"""``esbridge serve``: an HTTP server that speaks the engine's own REST API.

Every request goes on to the cluster unchanged (its body streamed both ways, its status, headers
and body answered back as the cluster gave them), except the searches of the indices the
configuration names: ``GET``/``POST /<index>/_search`` and ``/<index>/_msearch`` there are answered
by esbridge, in the engine's response shape, reranked (:class:`esbridge.aio.AsyncReranker`).
A client library of the engine pointed at the server needs no change.

The server holds no credentials: the ``Authorization`` header of each request (basic, ``ApiKey``,
``Bearer``) goes to the cluster with that request and every request esbridge makes to answer it
(:func:`esbridge.engine.calls.forwarded_headers`), and is never logged.

The configuration (:func:`load_config`) is a JSON file::

    {"indices": {"scifact": {"scorer": "evolved", "window": 100}}}

and a search may override it with ``"ext": {"esbridge": {...}}`` in its body (:data:`EXT_KEYS`),
which the cluster never sees.  The package follows a request: :mod:`~esbridge.serve.config` (the
configuration), :mod:`~esbridge.serve.search` (what a search asks, answers in the engine's shape),
:mod:`~esbridge.serve.shape` (``filter_path`` and ``pretty``), :mod:`~esbridge.serve.readonly`
(what ``--read-only`` lets through), :mod:`~esbridge.serve.metrics` and :mod:`~esbridge.serve.server`
(the aiohttp server); ``esbridge serve`` on the command line is :mod:`esbridge.cli.serve`.
"""

from esbridge.serve.config import INDEX_KEYS, IndexConfig, ServeConfig, load_config, parse_config
from esbridge.serve.search import EXT_KEYS
from esbridge.serve.server import build_app, serve

__all__ = ["IndexConfig", "ServeConfig", "load_config", "parse_config", "build_app", "serve", "EXT_KEYS",
           "INDEX_KEYS"]
