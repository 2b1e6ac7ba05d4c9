"""``docker-compose.yml`` is valid for Docker Compose, and each of its services runs the image with
the environment that esbridge's own Docker provisioning uses for that distribution.

Validated with ``docker compose config`` (Docker's compose plugin) where it is installed, else
with ``docker-compose config`` (Compose v1, Debian's ``docker-compose``); neither needs a Docker
engine.  Without either the tests are skipped, saying what to install; where
``ESBRIDGE_REQUIRE_DOCKER_TOOLS=1`` (CI) they fail instead.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from esbridge.nodes.provision import _DOCKER_ENV, DOCKER_IMAGES, SECRET_ENV
from tests.fakedocker import REQUIRE_DOCKER_TOOLS, docker_tool_missing, use_docker_client

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"

#: Which distribution of esbridge's provisioning each compose service is.  A service named
#: exactly after a distribution of DOCKER_IMAGES needs no entry; any other must have one.
SERVICE_DISTRIBUTION: dict[str, str] = {
    "opensearch": "opensearch",
    "elasticsearch": "elasticsearch",
}

#: The port esbridge's containers serve on (start_container exposes it).
ENGINE_PORT = 9200


@functools.cache
def compose_command() -> tuple[str, ...]:
    """``docker compose`` if the compose plugin answers, else ``docker-compose``; if neither is there,
    the test is skipped (where ESBRIDGE_REQUIRE_DOCKER_TOOLS is set, failed), naming what to install."""
    if shutil.which("docker") is not None:
        try:
            plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            plugin = None
        if plugin is not None and plugin.returncode == 0:
            return ("docker", "compose")
    if shutil.which("docker-compose") is not None:
        return ("docker-compose",)
    docker_tool_missing("neither `docker compose` (Docker's compose plugin) nor `docker-compose` is installed; "
                        "install one to validate docker-compose.yml, e.g. on Debian or Ubuntu "
                        "`apt-get install --no-install-recommends docker-compose`")


def compose_config(path: Path) -> subprocess.CompletedProcess[str]:
    """``<compose> --file path config``, relative paths taken from the repository's root (as for
    docker-compose.yml itself, wherever the copy is)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    return subprocess.run([*compose_command(), "--file", str(path), "--project-directory", str(ROOT), "config"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def valid_config(path: Path) -> dict[str, Any]:
    out = compose_config(path)
    assert out.returncode == 0, f"`{' '.join(compose_command())} config` rejects {path.name}:\n{out.stderr}"
    config = yaml.safe_load(out.stdout)
    assert isinstance(config, dict) and config.get("services"), f"no services in:\n{out.stdout}"
    return config


def distribution_of(service: str) -> str | None:
    if service in SERVICE_DISTRIBUTION:
        return SERVICE_DISTRIBUTION[service]
    return service if service in DOCKER_IMAGES else None


def container_ports(service: dict[str, Any]) -> set[int]:
    """The container side of each published port, in either form ``config`` prints
    (``"127.0.0.1:9200:9200/tcp"`` or ``{target: 9200, published: "9200", ...}``)."""
    out = set()
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            out.add(int(entry["target"]))
        else:
            out.add(int(str(entry).split("/")[0].rsplit(":", 1)[-1]))
    return out


def drift(config: dict[str, Any]) -> list[str]:
    """Where the services of a validated compose configuration and esbridge's Docker
    provisioning disagree, one line each."""
    found = []
    covered = set()
    for name, service in config["services"].items():
        distribution = distribution_of(name)
        if distribution is None or distribution not in DOCKER_IMAGES:
            found.append(f"service {name!r} is no distribution of esbridge's Docker provisioning: map it in "
                         f"SERVICE_DISTRIBUTION to one of {sorted(DOCKER_IMAGES)}, or give it its own entry in "
                         "DOCKER_IMAGES and _DOCKER_ENV (esbridge/nodes/provision.py)")
            continue
        covered.add(distribution)
        if service.get("image") != DOCKER_IMAGES[distribution]:
            found.append(f"service {name!r} runs {service.get('image')!r}; esbridge starts "
                         f"{DOCKER_IMAGES[distribution]!r} for {distribution}")
        secret = SECRET_ENV.get(distribution, ())
        environment = {str(k): None if v is None else str(v) for k, v in (service.get("environment") or {}).items()
                       if k not in secret}
        expected = _DOCKER_ENV.get(distribution, {})
        if environment != expected:
            found.append(f"service {name!r}'s environment is not esbridge's for {distribution}: only in the compose "
                         f"file {sorted(set(environment.items()) - set(expected.items()))}, only in esbridge "
                         f"{sorted(set(expected.items()) - set(environment.items()))}")
        if ENGINE_PORT not in container_ports(service):
            found.append(f"service {name!r} does not publish the container's port {ENGINE_PORT}")
    # and the other way: every image esbridge may start is one a compose service runs
    for distribution in sorted(set(DOCKER_IMAGES) - covered):
        found.append(f"no service runs {distribution}'s {DOCKER_IMAGES[distribution]!r}")
    for distribution in sorted(set(DOCKER_IMAGES) ^ set(_DOCKER_ENV)):
        found.append(f"{distribution!r} is in only one of DOCKER_IMAGES and _DOCKER_ENV")
    return found


def test_the_compose_file_is_valid_and_matches_provisioning() -> None:
    config = valid_config(COMPOSE_FILE)
    assert set(config["services"]) >= set(SERVICE_DISTRIBUTION), "SERVICE_DISTRIBUTION names a service there is not"
    assert drift(config) == []


def test_drift_is_found(tmp_path: Path) -> None:
    """A valid compose file that runs another image, another environment or a service esbridge
    does not provision is reported, service by service: the comparison above can fail."""
    doc = yaml.safe_load(COMPOSE_FILE.read_text())
    services = doc["services"]
    for service in services.values():
        service["image"] = service["image"] + "-other"
        if isinstance(service.get("environment"), list):
            service["environment"].append("ESBRIDGE_EXTRA=1")
        else:
            service["environment"] = {**(service.get("environment") or {}), "ESBRIDGE_EXTRA": "1"}
    extra = dict(next(iter(services.values())))
    services["not-provisioned"] = extra
    copy = tmp_path / "docker-compose.yml"
    copy.write_text(yaml.safe_dump(doc, sort_keys=False))
    found = drift(valid_config(copy))
    for name in services:
        if name == "not-provisioned":
            assert any(f"service {name!r} is no distribution" in line for line in found), found
        else:
            assert any(f"service {name!r} runs" in line for line in found), found
            assert any(f"service {name!r}'s environment" in line and "ESBRIDGE_EXTRA" in line for line in found), found
    assert all("no service runs" in line for line in drift({"services": {}}))
    assert len(drift({"services": {}})) == len(DOCKER_IMAGES)


def _remove_first_image(doc: dict[str, Any]) -> None:
    del next(iter(doc["services"].values()))["image"]


def _environment_as_number(doc: dict[str, Any]) -> None:
    next(iter(doc["services"].values()))["environment"] = 9200


def _unknown_key(doc: dict[str, Any]) -> None:
    service = next(iter(doc["services"].values()))
    service["imgae"] = service["image"]


def _ports_not_a_list(doc: dict[str, Any]) -> None:
    next(iter(doc["services"].values()))["ports"] = {"published": 9200}


@pytest.mark.parametrize("breakage", [_remove_first_image, _environment_as_number, _unknown_key,
                                      _ports_not_a_list, "yaml"],
                         ids=["no image", "environment a number", "misspelt key", "ports not a list",
                              "not YAML"])
def test_a_broken_compose_file_is_rejected(breakage: Any, tmp_path: Path) -> None:
    """The same command rejects a broken copy: the check above can fail."""
    text = COMPOSE_FILE.read_text()
    if breakage == "yaml":
        broken = text.replace("services:", "services: [", 1)
    else:
        doc = yaml.safe_load(text)
        breakage(doc)
        broken = yaml.safe_dump(doc, sort_keys=False)
    copy = tmp_path / "docker-compose.yml"
    copy.write_text(broken)
    out = compose_config(copy)
    assert out.returncode != 0, f"`config` accepted a broken file:\n{broken}\n{out.stdout}"
    assert out.stderr.strip(), "rejected without saying why"
    # and the unbroken copy, in the same place, is accepted: the breakage is what was rejected
    copy.write_text(text)
    valid_config(copy)


@pytest.mark.parametrize("required", [False, True], ids=["a user's run", "CI"])
def test_without_dockers_tools_these_tests_skip_unless_they_are_required(
        required: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine without Docker's tools a plain `pytest` skips the tests that need them, naming what to
    install; where ESBRIDGE_REQUIRE_DOCKER_TOOLS=1 (CI, `.ci/run`) they fail instead."""
    if required:
        monkeypatch.setenv(REQUIRE_DOCKER_TOOLS, "1")
    else:
        monkeypatch.delenv(REQUIRE_DOCKER_TOOLS, raising=False)
    monkeypatch.setattr(shutil, "which", lambda cmd, *args, **kwargs: None)
    outcome = pytest.fail.Exception if required else pytest.skip.Exception
    compose_command.cache_clear()
    try:
        with pytest.raises(outcome, match=r"neither `docker compose` .* nor `docker-compose` is installed; .*"
                                          r"`apt-get install --no-install-recommends docker-compose`"):
            compose_command()
    finally:
        compose_command.cache_clear()  # the other tests find the machine's own tools
    with pytest.raises(outcome, match=r"the docker CLI is not installed .*`apt-get install --no-install-recommends "
                                      r"docker\.io`"):
        use_docker_client(monkeypatch, "docker CLI")
