"""The Elasticsearch 8 distribution's pieces that need no JVM: the shipped plugin sources, the
node's configuration, its private record, and which credentials a connection uses."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest

from esbridge.nodes import artifacts, es_distribution, local
from esbridge.nodes.provision import ProvisionedEngine


def test_the_plugins_ship_their_sources_and_descriptors() -> None:
    for name in es_distribution.PLUGINS:
        files = dict(es_distribution.plugin_sources(name))
        descriptors = [f for f in files if f.endswith(".properties")]
        assert len(descriptors) == 1, name
        text = files[descriptors[0]].decode()
        assert f"name={name}" in text and "{elasticsearch_version}" in text
        assert any(f.endswith(".java") for f in files)
    analysis = b"".join(data for _, data in es_distribution.plugin_sources("esbridge-analysis"))
    # what esbridge's channels and the security index need from analysis-common
    for component in ("porter_stem", "stemmer", "truncate", "word_delimiter_graph", "word_delimiter", "unique",
                      "asciifolding", "edge_ngram", "pattern_capture", "whitespace", "keyword", "uax_url_email"):
        assert f'@NamedComponent("{component}")'.encode() in analysis, component
    mapper = b"".join(data for _, data in es_distribution.plugin_sources("esbridge-token-count"))
    assert b'CONTENT_TYPE = "token_count"' in mapper


def test_a_built_plugin_is_cached_by_its_sources() -> None:
    a = es_distribution.plugin_digest("esbridge-analysis", "8.19.21")
    assert a == es_distribution.plugin_digest("esbridge-analysis", "8.19.21")
    assert a != es_distribution.plugin_digest("esbridge-analysis", "8.19.22")
    assert a != es_distribution.plugin_digest("esbridge-token-count", "8.19.21")


def test_the_lockfile_pins_the_distribution_zip() -> None:
    spec = artifacts.runner_spec("elasticsearch8")
    (art,) = artifacts.read_lockfile(spec)
    assert spec.secured and spec.kind == "distribution" and spec.min_java >= 21
    assert art.extension == "zip" and len(art.sha1) == 40 and art.version == spec.version
    assert art.url(artifacts.DEFAULT_MAVEN_REPO) == (
        "https://repo1.maven.org/maven2/org/elasticsearch/distribution/integ-test-zip/elasticsearch/"
        f"{spec.version}/elasticsearch-{spec.version}.zip")


def test_the_node_is_secured_on_the_loopback_interface(tmp_path: Path) -> None:
    text = es_distribution.config_text("n", tmp_path, 9203, 9400)
    settings = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line and not line.startswith("#"))
    assert settings["network.host"] == "127.0.0.1" and settings["http.port"] == "9203"
    assert settings["xpack.security.enabled"] == "true" and settings["xpack.security.http.ssl.enabled"] == "true"
    assert settings["discovery.type"] == "single-node"
    assert settings["action.destructive_requires_name"] == "true"


def test_records_are_private_and_reprs_hold_no_secret(tmp_path: Path) -> None:
    creds = es_distribution.Credentials("esbridge", "pw-123456", "id:key-7890")
    es_distribution.save_credentials(tmp_path, creds)
    assert stat.S_IMODE((tmp_path / "credentials.json").stat().st_mode) == 0o600
    assert es_distribution.read_credentials(tmp_path) == creds
    assert "pw-123456" not in repr(creds) and "key-7890" not in repr(creds)
    node = local.NodeInfo(name="n", distribution="elasticsearch8", version="8.19.21", pid=1, port=9203, home="/x",
                          scheme="https", username="esbridge", password="pw-123456", api_key="id:key-7890",
                          ca_certs="/x/ca.crt")
    assert node.url == "https://127.0.0.1:9203"
    assert "pw-123456" not in repr(node) and "key-7890" not in repr(node)
    local.write_record(tmp_path / "node.json", node)
    assert stat.S_IMODE((tmp_path / "node.json").stat().st_mode) == 0o600
    assert local.read_record(tmp_path / "node.json") == node
    # a record from an older esbridge (no security fields) or a newer one (unknown fields) still reads
    old = {"name": "o", "distribution": "opensearch", "version": "3.8.0", "pid": 2, "port": 9201, "home": "/y",
           "added_later": True}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert local.read_record(tmp_path / "old.json").url == "http://127.0.0.1:9201"


def test_a_connection_uses_the_nodes_credentials_unless_given_others(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ESBRIDGE_URL", "ESBRIDGE_USERNAME", "ESBRIDGE_PASSWORD", "ESBRIDGE_API_KEY", "ESBRIDGE_CA_CERTS",
                "ESBRIDGE_VERIFY_CERTS"):
        monkeypatch.delenv(var, raising=False)
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    prov = ProvisionedEngine(url="https://127.0.0.1:9203", source="local", distribution="elasticsearch8",
                             credentials={"username": "esbridge", "password": "pw", "ca_certs": str(ca)})
    opts = prov.options()
    assert (opts.username, opts.password, opts.ca_certs) == ("esbridge", "pw", str(ca))
    assert prov.options(api_key="id:key").username is None  # an explicit key wins
    assert prov.options(api_key="id:key").ca_certs == str(ca)  # and the node's CA still applies
    in_url = ProvisionedEngine(url="https://me:mine@127.0.0.1:9203", source="url", distribution="elasticsearch8",
                               credentials=prov.credentials).options()
    assert (in_url.username, in_url.ca_certs) == (None, str(ca))  # the URL's user, the node's CA
    monkeypatch.setenv("ESBRIDGE_USERNAME", "other")
    monkeypatch.setenv("ESBRIDGE_PASSWORD", "other-pw")
    assert prov.options().username == "other"  # so do the variables
    assert prov.options().ca_certs == str(ca)
    monkeypatch.delenv("ESBRIDGE_USERNAME")
    monkeypatch.delenv("ESBRIDGE_PASSWORD")
    assert prov.options(verify_certs=False).ca_certs is None
    assert "pw" not in repr(prov)


def test_unpack_keeps_the_scripts_executable(tmp_path: Path) -> None:
    archive = tmp_path / "d.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        script = zipfile.ZipInfo("top/bin/run")
        script.external_attr = 0o755 << 16
        zf.writestr(script, "#!/bin/sh\n")
        zf.writestr("top/lib/a.jar", b"jar")
    home = es_distribution.unpack(archive, tmp_path, "top")
    assert stat.S_IMODE((home / "bin" / "run").stat().st_mode) == 0o755
    assert (home / "lib" / "a.jar").read_bytes() == b"jar"
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("top/../../escape", "x")
    with pytest.raises(Exception, match="unexpected entry"):
        es_distribution.unpack(bad, tmp_path, "top")
    assert not (tmp_path.parent / "escape").exists()


def test_docker_compose_pins_the_images_the_suite_uses() -> None:
    import re

    from esbridge.nodes.provision import DOCKER_IMAGES

    compose = (Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text()
    services = dict(re.findall(r"^  ([a-z0-9-]+):\n    image: (\S+)$", compose, flags=re.M))
    assert services == DOCKER_IMAGES
    es8 = compose.split("  elasticsearch8:", 1)[1]
    assert 'xpack.security.enabled: "true"' in es8 and "ELASTIC_PASSWORD: \"${ESBRIDGE_ES8_PASSWORD" in es8
