"""esbridge's choice of Docker, checked against a fake Docker Engine API (tests/fakedocker.py):
no Docker engine, no image and no container are needed, and none is run.

docker_available() is asked both ways it can ask: through the ``docker`` CLI and, where the CLI
is missing, through docker-py.  The full chain down to a real engine behind the fake container's
port is tests/engine/test_docker_provisioning.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esbridge.errors import ProvisioningError
from esbridge.nodes import local
from esbridge.nodes.provision import (
    _DOCKER_ENV,
    DOCKER_IMAGES,
    SECRET_ENV,
    docker_available,
    provision,
    start_container,
)
from tests.fakedocker import (
    CLIENT_AGENT,
    CLIENTS,
    fake_docker_engine,
    isolate_docker,
    not_docker_server,
    use_docker_client,
)

# where a fake container's port 9200 is published; nothing needs to answer there
PUBLISHED = 49200


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The machine's Docker settings kept out; starting a local node recorded (in the returned
    list) and refused, so a test that reaches it fails fast instead of starting a JVM."""
    isolate_docker(monkeypatch, tmp_path)
    started: list[str] = []

    def no_start(distribution: str = "opensearch", **kw: object) -> local.NodeInfo:
        started.append(distribution)
        raise ProvisioningError(f"a local {distribution} node would have been started")

    monkeypatch.setattr(local, "start", no_start)
    return started


@pytest.mark.parametrize("client", CLIENTS)
def test_docker_available_only_where_a_docker_engine_answers(client: str, isolated: list[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    use_docker_client(monkeypatch, client)
    with fake_docker_engine() as fake:
        monkeypatch.setenv("DOCKER_HOST", fake.host)
        assert docker_available()
        asked = [(r.method, r.path) for r in fake.requests if r.agent.startswith(CLIENT_AGENT[client])]
        assert ("GET", "/info") in asked, fake.requests
        assert all(r.agent.startswith(CLIENT_AGENT[client]) for r in fake.requests), fake.requests

        # ESBRIDGE_NO_DOCKER: not even asked
        fake.requests.clear()
        monkeypatch.setenv("ESBRIDGE_NO_DOCKER", "1")
        assert not docker_available()
        assert fake.requests == []
        monkeypatch.delenv("ESBRIDGE_NO_DOCKER")

        # no engine answers any more: the port is closed
        fake.stop()
        assert not docker_available()
    # something answers, but is no Docker engine (`docker info` then exits 0 and prints nothing)
    with not_docker_server() as host:
        monkeypatch.setenv("DOCKER_HOST", host)
        assert not docker_available()
    assert fake.created == [] and isolated == []


@pytest.mark.parametrize("distribution", sorted(DOCKER_IMAGES))
def test_start_container_runs_the_distributions_image_and_environment(distribution: str, isolated: list[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_docker_engine({9200: PUBLISHED}) as fake:
        monkeypatch.setenv("DOCKER_HOST", fake.host)
        prov = start_container(distribution)
        assert [c.image for c in fake.created] == [DOCKER_IMAGES[distribution]]
        assert fake.pulled == [DOCKER_IMAGES[distribution]]
        container = fake.created[0]
        assert _without_secrets(container.env, distribution) == _DOCKER_ENV[distribution]
        assert "9200/tcp" in container.config["ExposedPorts"]
        assert container.status == "running"
        assert (prov.source, prov.distribution) == ("docker", distribution)
        assert prov.url == f"http://127.0.0.1:{PUBLISHED}"
        prov.release()
        assert fake.removed == [container.id] and fake.containers == {}
        assert prov.handle is None
        prov.release()  # a second release does nothing
        assert fake.removed == [container.id]
        assert fake.unsupported == []


def test_the_image_can_be_overridden(isolated: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    distribution = sorted(DOCKER_IMAGES)[0]
    monkeypatch.setenv(f"ESBRIDGE_{distribution.upper()}_IMAGE", "registry.example/mirror/engine:1.2.3")
    with fake_docker_engine({9200: PUBLISHED}) as fake:
        monkeypatch.setenv("DOCKER_HOST", fake.host)
        start_container(distribution).release()
    assert [c.image for c in fake.created] == ["registry.example/mirror/engine:1.2.3"]
    assert _without_secrets(fake.created[0].env, distribution) == _DOCKER_ENV[distribution]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("why", ["ESBRIDGE_NO_DOCKER", "no engine answers", "not a Docker engine"])
def test_provision_chooses_no_docker_where_none_answers(client: str, why: str, isolated: list[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    use_docker_client(monkeypatch, client)
    distribution = sorted(DOCKER_IMAGES)[0]
    with fake_docker_engine({9200: PUBLISHED}) as fake, not_docker_server() as other:
        monkeypatch.setenv("DOCKER_HOST", fake.host)
        # the control: as things are, Docker is chosen
        prov = provision(distribution, progress=False)
        assert prov.source == "docker"
        prov.release()
        assert len(fake.created) == 1 and isolated == []
        if why == "ESBRIDGE_NO_DOCKER":
            monkeypatch.setenv("ESBRIDGE_NO_DOCKER", "1")
        elif why == "no engine answers":
            fake.stop()
        else:
            monkeypatch.setenv("DOCKER_HOST", other)
        with pytest.raises(ProvisioningError, match=f"a local {distribution} node would have been started"):
            provision(distribution, progress=False)
        assert isolated == [distribution]
        assert len(fake.created) == 1


def test_provision_takes_a_url_before_docker(isolated: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine URL is used as it is: Docker is not even asked."""
    with fake_docker_engine() as fake:
        monkeypatch.setenv("DOCKER_HOST", fake.host)
        assert provision("opensearch", url="http://127.0.0.1:1").source == "url"
        monkeypatch.setenv("ESBRIDGE_URL", "http://127.0.0.1:2")
        assert provision("opensearch").url == "http://127.0.0.1:2"
    assert fake.requests == []


def _without_secrets(env: dict[str, str], distribution: str) -> dict[str, str]:
    """The container's environment less the secrets esbridge generates, which must be set."""
    for name in SECRET_ENV.get(distribution, ()):
        assert env.get(name), f"{name} was not set for {distribution}"
    return {k: v for k, v in env.items() if k not in SECRET_ENV.get(distribution, ())}
