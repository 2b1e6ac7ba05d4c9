"""Provisioning chooses Docker where a Docker engine answers, and what it starts is an engine:
a fake Docker Engine API (tests/fakedocker.py) stands in for Docker, and the port 9200 of the
container it "starts" is published onto the real engine under test.  So ``provision()`` with no
URL goes docker_available() → testcontainers → a URL that ``Engine.connect`` identifies as that
engine, and ``release()`` removes the container.  No image is pulled and no container runs.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from esbridge.engine.client import Engine
from esbridge.nodes.provision import _DOCKER_ENV, DOCKER_IMAGES, SECRET_ENV, provision
from tests.fakedocker import CLIENT_AGENT, CLIENTS, fake_docker_engine, isolate_docker, use_docker_client

pytestmark = pytest.mark.engine

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@pytest.mark.parametrize("client", CLIENTS)
def test_provision_starts_a_container_where_a_docker_engine_answers(engine: Engine, client: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    url = urlsplit(engine.options.url)
    assert url.hostname in LOOPBACK and url.port is not None, (
        f"the engine under test must answer on this machine's loopback (the fake Docker engine publishes "
        f"container ports there), not at {engine.options.display_url}")
    distribution = engine.distribution
    assert distribution in DOCKER_IMAGES, f"no Docker image for {distribution}"
    isolate_docker(monkeypatch, tmp_path)
    use_docker_client(monkeypatch, client)
    with fake_docker_engine({9200: url.port}) as fake:
        monkeypatch.setenv("DOCKER_HOST", fake.host)
        prov = provision(distribution, progress=False)
        try:
            # Docker was chosen, after asking the engine through the client under test
            assert (prov.source, prov.distribution) == ("docker", distribution)
            assert any(r.path == "/info" and r.agent.startswith(CLIENT_AGENT[client]) for r in fake.requests), (
                fake.requests)
            # ... and the engine was given esbridge's image and environment for the distribution
            assert [c.image for c in fake.created] == [DOCKER_IMAGES[distribution]]
            container = fake.created[0]
            assert _without_secrets(container.env, distribution) == _DOCKER_ENV[distribution]
            assert "9200/tcp" in container.config["ExposedPorts"]
            assert container.status == "running"
            # the URL is the container's published port: the engine under test answers there
            found = Engine.connect(prov.url)
            try:
                assert found.info == engine.info
                assert found.request("GET", "/")["cluster_uuid"] == engine.request("GET", "/")["cluster_uuid"]
            finally:
                found.close()
        finally:
            prov.release()
        assert fake.removed == [container.id] and fake.containers == {}
        assert prov.handle is None
        assert fake.unsupported == []


def _without_secrets(env: dict[str, str], distribution: str) -> dict[str, str]:
    """The container's environment less the secrets esbridge generates, which must be set."""
    for name in SECRET_ENV.get(distribution, ()):
        assert env.get(name), f"{name} was not set for {distribution}"
    return {k: v for k, v in env.items() if k not in SECRET_ENV.get(distribution, ())}
