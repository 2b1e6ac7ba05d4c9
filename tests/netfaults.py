"""Network faults for the suite: a loopback proxy that injects them between esbridge and a real
engine (over TLS to an engine that speaks it), and an impostor that answers on a port as if it
were a node.

The proxy forwards every request to the engine unless its ``policy`` says otherwise.  A policy
is called with the request's method, path and the number of earlier requests that matched the
same method and path prefix, and returns one of the :class:`Fault` values (or ``None`` to
forward untouched).
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Fault:
    """What the proxy does with one request.

    kind:
        ``"status"`` answer ``status`` without forwarding (e.g. a whole-request 429);
        ``"reset_before"`` reset the connection without forwarding;
        ``"reset_after"`` forward (the engine applies the request), then reset instead of answering;
        ``"delay"`` wait ``seconds`` before forwarding;
        ``"item_429"`` forward a bulk request, then mark its first ``items`` items as 429 rejections;
        ``"truncate"`` forward, then answer only the first ``items`` bytes of the engine's answer
        (with their length as its content length, so the answer is whole but cut);
        ``"body"`` forward, then answer ``body`` instead of the engine's answer (same status).
    """

    kind: str
    status: int = 429
    seconds: float = 0.0
    items: int = 0
    body: bytes = b""


Policy = Callable[[str, str, int], "Fault | None"]


@dataclass
class FaultLog:
    """What the proxy saw and did, for assertions."""

    requests: list[tuple[str, str]] = field(default_factory=list)
    faults: list[tuple[str, str, str]] = field(default_factory=list)


def _reset(handler: BaseHTTPRequestHandler) -> None:
    # SO_LINGER 0: close() sends a TCP RST instead of a FIN.
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()
    handler.wfile = io.BytesIO()  # the handler's finish() must not write to the closed socket
    handler.close_connection = True


@contextmanager
def fault_proxy(upstream: str, policy: Policy) -> Iterator[tuple[str, FaultLog]]:
    """A proxy on 127.0.0.1 in front of ``upstream``; yields its URL and its log."""
    up = urlsplit(upstream)
    log = FaultLog()
    counts: dict[tuple[str, str], int] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            path_only = self.path.split("?", 1)[0]
            with lock:
                key = (self.command, path_only)
                n = counts.get(key, 0)
                counts[key] = n + 1
                log.requests.append((self.command, self.path))
            fault = policy(self.command, path_only, n)
            if fault is not None:
                with lock:
                    log.faults.append((self.command, self.path, fault.kind))
            if fault is not None and fault.kind == "status":
                payload = json.dumps({"error": {"type": "injected", "reason": f"injected {fault.status}"},
                                      "status": fault.status}).encode()
                self._answer(fault.status, {"content-type": "application/json"}, payload)
                return
            if fault is not None and fault.kind == "reset_before":
                _reset(self)
                return
            if fault is not None and fault.kind == "delay":
                time.sleep(fault.seconds)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "accept-encoding", "connection", "content-length")}
            host = up.hostname or "127.0.0.1"
            conn = (http.client.HTTPSConnection(host, up.port, timeout=120, context=ssl._create_unverified_context())
                    if up.scheme == "https" else http.client.HTTPConnection(host, up.port, timeout=120))
            try:
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status = resp.status
                out_headers = {k: v for k, v in resp.getheaders()
                               if k.lower() not in ("transfer-encoding", "connection", "content-length")}
            finally:
                conn.close()
            if fault is not None and fault.kind == "reset_after":
                _reset(self)
                return
            if fault is not None and fault.kind == "item_429" and status == 200:
                doc = json.loads(data)
                for item in doc.get("items", [])[: fault.items]:
                    result = next(iter(item.values()))
                    result["status"] = 429
                    result["error"] = {"type": "es_rejected_execution_exception", "reason": "injected"}
                doc["errors"] = True
                data = json.dumps(doc).encode()
            if fault is not None and fault.kind == "truncate":
                data = data[: fault.items]
            if fault is not None and fault.kind == "body":
                data = fault.body
            self._answer(status, out_headers, data)

        def _answer(self, status: int, headers: dict[str, str], data: bytes) -> None:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

    server = _QuietServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        server.shutdown()
        server.server_close()


class _QuietServer(ThreadingHTTPServer):
    """A client that gave up (a timeout the test provoked) is no error of the proxy: without this,
    socketserver prints the broken pipe's traceback on standard error, where a later test that
    reads the process's output would find it."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


@contextmanager
def impostor_node(port: int, pid: int) -> Iterator[None]:
    """Something answering on ``port`` like a healthy node of process ``pid``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.startswith("/_nodes/_local/process"):
                body: Any = {"nodes": {"imp": {"process": {"id": pid}}}}
            elif self.path.startswith("/_cluster/health"):
                body = {"status": "green"}
            else:
                body = {"version": {"number": "3.8.0", "distribution": "opensearch"}}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
