"""A fake Docker Engine API on loopback, for testing esbridge's Docker provisioning where no
Docker engine runs.

It implements just enough of the API for the ``docker`` CLI's ``docker info`` (a ``/_ping``
that negotiates the API version, then ``/v1.xx/info``) and for testcontainers through docker-py:
the version query, image inspect and pull, container create, start, inspect, list, logs, stop
and remove.  No process runs: a "started" container only publishes its ports onto whatever the
test maps them to (e.g. a real engine node already running), and its log says ``started``.

Reach it with ``DOCKER_HOST=tcp://127.0.0.1:PORT`` (:attr:`FakeDocker.host`); every request,
container configuration and removal is recorded for the test's assertions.  A request the fake
does not implement is answered 404 and recorded in :attr:`FakeDocker.unsupported`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

API_VERSION = "1.41"
SERVER_VERSION = "20.10.24-fake"
_VERSIONED = re.compile(r"^/v\d+\.\d+(/.*)$")


@dataclass(frozen=True)
class Request:
    """One request the fake received (the path without its API version prefix)."""

    method: str
    path: str
    agent: str  # User-Agent: "Docker-Client/..." from the CLI, "docker-sdk-python/..." from docker-py


@dataclass
class FakeContainer:
    """A container as the fake keeps it."""

    id: str
    name: str
    config: dict[str, Any]  # the create request's body, as received
    status: str = "created"  # created, running, exited
    ports: dict[str, int] = field(default_factory=dict)  # "9200/tcp" -> published host port

    @property
    def image(self) -> str:
        return str(self.config.get("Image", ""))

    @property
    def env(self) -> dict[str, str]:
        """The environment as ``KEY=VALUE`` entries were received, as a mapping."""
        return dict(entry.split("=", 1) for entry in self.config.get("Env") or [])

    def inspect(self) -> dict[str, Any]:
        running = self.status == "running"
        exposed = dict(self.config.get("ExposedPorts") or {})
        return {
            "Id": self.id,
            "Name": f"/{self.name}",
            "Image": f"sha256:{_digest(self.image)}",
            "Created": "2024-01-01T00:00:00Z",
            "State": {"Status": self.status, "Running": running, "Paused": False, "Restarting": False,
                      "OOMKilled": False, "Dead": False, "Pid": 4242 if running else 0,
                      "ExitCode": 0, "Error": "", "StartedAt": "2024-01-01T00:00:01Z",
                      "FinishedAt": "0001-01-01T00:00:00Z"},
            # Tty: logs are one raw stream, not docker's multiplexed frames
            "Config": {"Image": self.image, "Env": list(self.config.get("Env") or []), "Tty": True,
                       "ExposedPorts": exposed, "Labels": dict(self.config.get("Labels") or {}),
                       "Cmd": self.config.get("Cmd")},
            "HostConfig": {"NetworkMode": "bridge",
                           "PortBindings": dict((self.config.get("HostConfig") or {}).get("PortBindings") or {})},
            "NetworkSettings": {
                "Ports": {p: [{"HostIp": "127.0.0.1", "HostPort": str(h)}] for p, h in self.ports.items()}
                if running else {},
                "Networks": {"bridge": self._network()},
            },
        }

    def summary(self) -> dict[str, Any]:
        return {
            "Id": self.id, "Names": [f"/{self.name}"], "Image": self.image, "State": self.status,
            "Status": "Up 1 second" if self.status == "running" else self.status.capitalize(),
            "Labels": dict(self.config.get("Labels") or {}),
            "Ports": [{"IP": "127.0.0.1", "PrivatePort": int(p.split("/")[0]), "PublicPort": h,
                       "Type": p.split("/")[1]} for p, h in self.ports.items()] if self.status == "running" else [],
            "HostConfig": {"NetworkMode": "bridge"},
            "NetworkSettings": {"Networks": {"bridge": self._network()}},
        }

    @staticmethod
    def _network() -> dict[str, Any]:
        # loopback: a client inside a container (testcontainers then takes the gateway's address)
        # reaches the published ports too
        return {"Gateway": "127.0.0.1", "IPAddress": "127.0.0.1", "NetworkID": _digest("bridge")}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeDocker:
    """The fake engine's state.  ``port_map`` says where a container's port is published
    (``{9200: 9201}``: the container's 9200 is the host's 9201); other exposed ports get a free
    port on which nothing answers."""

    def __init__(self, port_map: dict[int, int] | None = None, log: str = "") -> None:
        self.port_map = dict(port_map or {})
        self.log = log or "[INFO ][fake.Node] initialized\n[INFO ][fake.Node] started\n"
        self.requests: list[Request] = []
        self.unsupported: list[tuple[str, str]] = []
        self.pulled: list[str] = []
        self.created: list[FakeContainer] = []  # every container ever created, in order
        self.containers: dict[str, FakeContainer] = {}  # those not removed
        self.removed: list[str] = []  # ids, in order
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def host(self) -> str:
        """The value for ``DOCKER_HOST``."""
        return f"tcp://127.0.0.1:{self.port}"

    def start(self) -> FakeDocker:
        fake = self

        class Handler(_Handler):
            state = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-docker", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop answering (the port is closed: a client's connection is refused)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # -- the API ----------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: bytes,
               agent: str = "") -> tuple[int, dict[str, str], bytes]:
        m = _VERSIONED.match(path)
        path = m.group(1) if m else path
        with self.lock:
            self.requests.append(Request(method, path, agent))
            if path == "/_ping" and method in ("GET", "HEAD"):
                return 200, {"Content-Type": "text/plain; charset=utf-8"}, b"OK"
            if path == "/version" and method == "GET":
                return _json(200, {"Version": SERVER_VERSION, "ApiVersion": API_VERSION, "MinAPIVersion": "1.12",
                                   "Os": "linux", "Arch": "amd64", "KernelVersion": "6.1.0",
                                   "Platform": {"Name": "fake Docker Engine"}, "Components": []})
            if path == "/info" and method == "GET":
                return _json(200, {"ID": "FAKE", "Name": "fake-docker", "ServerVersion": SERVER_VERSION,
                                   "OperatingSystem": "fake", "OSType": "linux", "Architecture": "x86_64",
                                   "Containers": len(self.containers),
                                   "ContainersRunning": sum(c.status == "running" for c in self.containers.values()),
                                   "ContainersPaused": 0,
                                   "ContainersStopped": sum(c.status != "running" for c in self.containers.values()),
                                   "Images": len(self.pulled), "Driver": "overlay2", "NCPU": 1, "MemTotal": 1 << 30,
                                   "DockerRootDir": "/var/lib/docker", "Warnings": None})
            if path == "/images/create" and method == "POST":
                image = query.get("fromImage", [""])[0]
                tag = query.get("tag", ["latest"])[0] or "latest"
                ref = image if "@" in image else f"{image}:{tag}"
                self.pulled.append(ref)
                return 200, {"Content-Type": "application/json"}, (
                    json.dumps({"status": f"Pulling from {image}", "id": tag}) + "\n"
                    + json.dumps({"status": f"Status: Downloaded newer image for {ref}"}) + "\n").encode()
            m = re.fullmatch(r"/images/(.+)/json", path)
            if m and method == "GET":
                ref = unquote(m.group(1))
                if ref not in self.pulled and f"{ref}:latest" not in self.pulled:
                    return _json(404, {"message": f"No such image: {ref}"})
                return _json(200, {"Id": f"sha256:{_digest(ref)}", "RepoTags": [ref], "RepoDigests": []})
            if path == "/containers/create" and method == "POST":
                config = json.loads(body or b"{}")
                image = str(config.get("Image", ""))
                if image not in self.pulled and f"{image}:latest" not in self.pulled:
                    return _json(404, {"message": f"No such image: {image}"})
                cid = secrets.token_hex(32)
                name = query.get("name", [f"fake_{cid[:8]}"])[0]
                container = FakeContainer(cid, name, config)
                self.created.append(container)
                self.containers[cid] = container
                return _json(201, {"Id": cid, "Warnings": []})
            if path == "/containers/json" and method == "GET":
                filters = json.loads(query.get("filters", ["{}"])[0] or "{}")
                ids = filters.get("id") or []
                found = [c.summary() for c in self.containers.values()
                         if (query.get("all", ["0"])[0] in ("1", "true", "True") or c.status == "running")
                         and (not ids or any(c.id.startswith(i) for i in ids))]
                return _json(200, found)
            if path == "/networks" and method == "GET":
                return _json(200, [])
            m = re.fullmatch(r"/containers/([^/]+)(/[a-z]+)?", path)
            if m:
                found_container = self._find(m.group(1))
                if found_container is None:
                    return _json(404, {"message": f"No such container: {m.group(1)}"})
                container = found_container
                action = m.group(2) or ""
                if action == "/json" and method == "GET":
                    return _json(200, container.inspect())
                if action == "/start" and method == "POST":
                    if container.status != "running":
                        container.status = "running"
                        container.ports = {p: self._publish(p) for p in container.config.get("ExposedPorts") or {}}
                    return 204, {}, b""
                if action == "/logs" and method == "GET":
                    return 200, {"Content-Type": "application/vnd.docker.raw-stream"}, self.log.encode()
                if action == "/stop" and method == "POST":
                    container.status = "exited"
                    container.ports = {}
                    return 204, {}, b""
                if action == "" and method == "DELETE":
                    force = query.get("force", ["0"])[0] in ("1", "true", "True")
                    if container.status == "running" and not force:
                        return _json(409, {"message": f"cannot remove container {container.id[:12]}: it is running"})
                    del self.containers[container.id]
                    self.removed.append(container.id)
                    return 204, {}, b""
            self.unsupported.append((method, path))
            return _json(404, {"message": f"the fake Docker engine does not implement {method} {path}"})

    def _find(self, ref: str) -> FakeContainer | None:
        for c in self.containers.values():
            if c.id.startswith(ref) or c.name == ref:
                return c
        return None

    def _publish(self, port: str) -> int:
        number = int(port.split("/")[0])
        return self.port_map[number] if number in self.port_map else _free_port()


def _json(status: int, payload: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # headers and body in one write, flushed after each request
    disable_nagle_algorithm = True
    state: FakeDocker

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            body = self.rfile.read(length)
        elif self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = self._read_chunked()
        else:
            body = b""
        status, headers, payload = self.state.handle(self.command, parts.path, parse_qs(parts.query), body,
                                                   self.headers.get("User-Agent", ""))
        self.send_response(status)
        for key, value in {"Api-Version": API_VERSION, "Docker-Experimental": "false", "Ostype": "linux",
                           "Server": f"Docker/{SERVER_VERSION} (linux)", **headers}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _read_chunked(self) -> bytes:
        out = b""
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return out
            out += self.rfile.read(size)
            self.rfile.readline()

    do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


@contextmanager
def fake_docker_engine(port_map: dict[int, int] | None = None, log: str = "") -> Iterator[FakeDocker]:
    """A running :class:`FakeDocker`, stopped on exit."""
    fake = FakeDocker(port_map, log).start()
    try:
        yield fake
    finally:
        fake.stop()


@contextmanager
def not_docker_server() -> Iterator[str]:
    """An HTTP server on loopback that answers every request with a JSON body, 200, but is no
    Docker engine; yields its ``DOCKER_HOST`` value."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = 1 << 16
        disable_nagle_algorithm = True

        def _serve(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            payload = b'{"hello": "not a Docker engine"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="not-docker", daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


#: How docker_available() asks whether an engine answers: the ``docker`` CLI where installed,
#: else docker-py through the Engine API (:func:`use_docker_client` picks one for a test).
CLIENTS = ("docker CLI", "Docker Engine API")
CLIENT_AGENT = {"docker CLI": "Docker-Client/", "Docker Engine API": "docker-sdk-python/"}


#: Set (to anything but ``0``) where Docker's tools must be installed: a test that needs one then fails
#: where it is missing instead of being skipped.  ``.ci/run`` sets it.
REQUIRE_DOCKER_TOOLS = "ESBRIDGE_REQUIRE_DOCKER_TOOLS"


def docker_tool_missing(message: str) -> NoReturn:
    """A test needs one of Docker's tools (the ``docker`` CLI, Docker Compose), which is not installed:
    skipped, ``message`` saying what to install, unless :data:`REQUIRE_DOCKER_TOOLS` is set; failed then.
    None of them needs a Docker engine."""
    if os.environ.get(REQUIRE_DOCKER_TOOLS, "") not in ("", "0"):
        pytest.fail(f"{message} ({REQUIRE_DOCKER_TOOLS} is set: a missing tool fails the test)")
    pytest.skip(f"{message} (with {REQUIRE_DOCKER_TOOLS}=1, as in CI, a missing tool fails the test)")


def use_docker_client(monkeypatch: pytest.MonkeyPatch, client: str) -> None:
    """Make docker_available() ask through ``client`` (one of :data:`CLIENTS`): the CLI must be
    installed (the test is skipped, or where :data:`REQUIRE_DOCKER_TOOLS` is set fails, saying what to
    install, where it is not); for the API it is hidden."""
    if client == "docker CLI":
        if shutil.which("docker") is None:
            docker_tool_missing("the docker CLI is not installed (a Docker engine is not needed): install it, e.g. "
                                "on Debian or Ubuntu `apt-get install --no-install-recommends docker.io`, or "
                                "Docker's docker-ce-cli package")
        return
    real_which = shutil.which

    def which(cmd: Any, *args: Any, **kwargs: Any) -> str | None:
        return None if str(cmd).rsplit("/", 1)[-1] == "docker" else real_which(cmd, *args, **kwargs)

    monkeypatch.setattr(shutil, "which", which)


def isolate_docker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep the machine's own Docker and esbridge settings out of a test: no Docker contexts,
    credentials, testcontainers host overrides or Ryuk reaper container, no engine URL, and an
    empty ``ESBRIDGE_HOME`` (no running local node is found)."""
    from testcontainers.core.config import testcontainers_config

    for var in ("ESBRIDGE_URL", "ESBRIDGE_NO_DOCKER", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY",
                "DOCKER_CERT_PATH", "DOCKER_AUTH_CONFIG", "TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    for name in list(os.environ):
        if name.startswith("ESBRIDGE_") and name.endswith("_IMAGE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path / "esbridge-home"))
    monkeypatch.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
    # testcontainers read some settings when imported; those that this version has are reset
    for attr, value in (("_ryuk_disabled", None),  # None: TESTCONTAINERS_RYUK_DISABLED is read again
                        ("tc_properties", {}), ("tc_host_override", None), ("connection_mode_override", None),
                        ("_docker_auth_config", None), ("hub_image_name_prefix", "")):
        if hasattr(testcontainers_config, attr):
            monkeypatch.setattr(testcontainers_config, attr, value)
