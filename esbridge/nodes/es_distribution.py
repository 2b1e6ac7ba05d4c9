"""Elasticsearch 8 from the distribution Elastic publishes on Maven Central, secured.

``org.elasticsearch.distribution.integ-test-zip:elasticsearch`` is the server with the
transport, x-pack core and x-pack security modules, but without the analysis-common,
mapper-extras and lang-painless modules.  esbridge makes up for the first two with two
plugins whose Java sources ship in the package (``esbridge/nodes/plugins/``):

* ``esbridge-analysis`` (stable plugin API): the token filters and tokenizers esbridge's
  channels use (``porter_stem``, ``stemmer``, ``truncate``, ``word_delimiter(_graph)``,
  tokenizer ``whitespace``, ...) and those the security index needs (``pattern_capture``,
  tokenizer ``uax_url_email``), each the Lucene class analysis-common wraps;
* ``esbridge-token-count`` (classic plugin): the ``token_count`` field type.

They are compiled with the JDK's ``javac`` against the jars of the distribution's own
``lib/`` (nothing else is downloaded), packed with :mod:`zipfile`, cached under
``$ESBRIDGE_HOME/engines/`` by a hash of their sources, and installed with the
distribution's ``bin/elasticsearch-plugin``.  Painless is not available on this node.

The node runs with security on: TLS on HTTP with a CA and a node certificate made by the
distribution's ``bin/elasticsearch-certutil``, a file-realm superuser with a generated
password (``bin/elasticsearch-users``, the password given on standard input, never on a
command line), and an API key created through ``POST /_security/api_key``.  The
credentials are kept in the node's record under ``$ESBRIDGE_HOME/nodes/<name>/`` (mode
0600) and never printed or logged.

Elasticsearch refuses to run as root.  When esbridge runs as root, the node runs as the
unprivileged user ``esbridge-es`` (``$ESBRIDGE_ES_USER``; created with ``useradd`` if
missing) through ``setpriv`` (or ``runuser``), and the files the node reads and writes (the
unpacked distribution, the node's configuration, data and logs) live under that user's home
directory, since ``$ESBRIDGE_HOME`` is usually inside root's home, which no other user can
enter.  The records with the credentials and the CA's key stay under ``$ESBRIDGE_HOME``.
Otherwise the node runs as the calling user, everything under ``$ESBRIDGE_HOME``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from esbridge.errors import ProvisioningError
from esbridge.nodes import features_plugin

#: The user the node runs as when esbridge runs as root.
SERVICE_USER = "esbridge-es"
#: The file-realm superuser esbridge creates on its node.
SUPERUSER = "esbridge"
#: The plugins built from ``esbridge/nodes/plugins/<name>/``, in install order.
PLUGINS = ("esbridge-analysis", "esbridge-token-count")
#: ``--release`` of the plugins' class files (the server's own jars need Java 21).
JAVA_RELEASE = 21
PLUGIN_VERSION = "1.0.0"


# ---------------------------------------------------------------------------
# Who runs the node, and where its files live
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ServiceAccount:
    """The unprivileged user a root-run esbridge starts the node as."""

    name: str
    uid: int
    gid: int
    home: Path


def service_account() -> ServiceAccount | None:
    """The account the node runs as when esbridge runs as root (created if missing); ``None``
    when esbridge runs as another user (the node then runs as that user)."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("ESBRIDGE_ES_USER", SERVICE_USER)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise ProvisioningError(
                f"Elasticsearch does not run as root and there is no user {name!r} to run it as, nor "
                "useradd to create one; create an unprivileged user and set ESBRIDGE_ES_USER to its "
                "name, or run esbridge as a normal user"
            ) from None
        out = subprocess.run([useradd, "--system", "--user-group", "--create-home",
                              "--home-dir", f"/var/lib/{name}", "--shell", "/usr/sbin/nologin", name],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise ProvisioningError(f"could not create the user {name!r} to run Elasticsearch as: "
                                    f"{(out.stderr or out.stdout).strip()[:300]}") from None
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0:
        raise ProvisioningError(f"ESBRIDGE_ES_USER={name!r} is root; Elasticsearch does not run as root")
    home = Path(entry.pw_dir)
    if not home.is_dir():
        home.mkdir(parents=True, mode=0o750)
        os.chown(home, entry.pw_uid, entry.pw_gid)
    return ServiceAccount(name, entry.pw_uid, entry.pw_gid, home)


def runtime_root(account: ServiceAccount | None, cache: Path) -> Path:
    """Where the node's own files live: ``cache`` itself, or for a root-run esbridge a
    directory in the service account's home, one per ``$ESBRIDGE_HOME``."""
    if account is None:
        return cache
    root = account_root(account.home, cache)
    root.mkdir(parents=True, exist_ok=True)
    for d in (account.home / "esbridge", root):
        os.chown(d, account.uid, account.gid)
        d.chmod(0o750)
    return root


def account_root(home: Path, cache: Path) -> Path:
    """:func:`runtime_root` in the service account's ``home`` (nothing created)."""
    return home / "esbridge" / hashlib.sha1(str(cache.resolve()).encode()).hexdigest()[:12]


def existing_root(cache: Path) -> Path | None:
    """:func:`runtime_root` as it is, without creating the account or any directory: ``None`` where
    esbridge runs as root and the service account does not exist (nothing was installed for it)."""
    if os.geteuid() != 0:
        return cache
    try:
        entry = pwd.getpwnam(os.environ.get("ESBRIDGE_ES_USER", SERVICE_USER))
    except KeyError:
        return None
    return account_root(Path(entry.pw_dir), cache)


def chown_tree(path: Path, account: ServiceAccount | None) -> None:
    """Give ``path`` and everything below it to the service account (nothing without one)."""
    if account is None:
        return
    os.chown(path, account.uid, account.gid, follow_symlinks=False)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), account.uid, account.gid, follow_symlinks=False)


def as_account(account: ServiceAccount | None, cmd: Sequence[str]) -> list[str]:
    """``cmd`` run as the service account (unchanged without one)."""
    if account is None:
        return list(cmd)
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        return [setpriv, f"--reuid={account.uid}", f"--regid={account.gid}", "--init-groups", "--", *cmd]
    runuser = shutil.which("runuser")
    if runuser is not None:
        return [runuser, "-u", account.name, "--", *cmd]
    raise ProvisioningError(
        "Elasticsearch does not run as root, and neither setpriv nor runuser (util-linux) is there to "
        "run it as another user; install util-linux or run esbridge as a normal user"
    )


# ---------------------------------------------------------------------------
# The distribution and its plugins
# ---------------------------------------------------------------------------

def java_home(java: str) -> Path:
    """The JDK directory of a ``.../bin/java`` executable."""
    return Path(os.path.realpath(java)).parent.parent


def tool_env(java: str, conf: Path | None = None) -> dict[str, str]:
    """Environment for the distribution's scripts: a clean one, with the JDK and config."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "ES_JAVA_HOME": str(java_home(java)),
        # the command-line tools' default heap is too small to scan a stable plugin
        "CLI_JAVA_OPTS": "-Xmx512m",
    }
    if conf is not None:
        env["ES_PATH_CONF"] = str(conf)
    return env


def unpack(archive: Path, dest: Path, top: str) -> Path:
    """Unpack ``archive`` (whose entries are under ``top/``) to ``dest/top``, with the
    files' permission bits (the scripts under ``bin/`` must stay executable)."""
    target = dest / top
    if target.exists():
        shutil.rmtree(target)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest))
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = info.filename
                if not name.startswith(f"{top}/") or ".." in Path(name).parts or name.startswith("/"):
                    raise ProvisioningError(f"{archive.name}: unexpected entry {name!r}")
                zf.extract(info, tmp)
                mode = (info.external_attr >> 16) & 0o777
                if mode and not info.is_dir():
                    os.chmod(tmp / name, mode)
        os.replace(tmp / top, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def plugin_sources(name: str) -> list[tuple[str, bytes]]:
    """The files of the plugin ``name`` shipped in the package, sorted by file name."""
    folder = resources.files("esbridge.nodes").joinpath("plugins", name)
    files = [(p.name, p.read_bytes()) for p in folder.iterdir()
             if p.name.endswith((".java", ".properties"))]
    if not any(n.endswith(".java") for n, _ in files):
        raise ProvisioningError(f"the package has no sources of the plugin {name!r}; reinstall esbridge")
    return sorted(files)


def plugin_digest(name: str, es_version: str) -> str:
    """A hash of what the plugin ``name`` is built from (its sources, the server version, the
    release level); the built plugin is cached under it."""
    h = hashlib.sha256(f"{name}\0{es_version}\0{JAVA_RELEASE}\0{PLUGIN_VERSION}\0".encode())
    for fname, data in plugin_sources(name):
        h.update(fname.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()[:16]


def build_plugin(name: str, es_home: Path, es_version: str, java: str, cache: Path) -> Path:
    """The plugin zip of ``name``, compiled against ``es_home/lib`` (cached in ``cache``)."""
    digest = plugin_digest(name, es_version)
    out = cache / f"{name}-{digest}.zip"
    if out.exists():
        return out
    javac = Path(os.path.realpath(java)).parent / "javac"
    if not javac.exists():
        raise ProvisioningError(
            f"building esbridge's Elasticsearch plugins needs a JDK {JAVA_RELEASE}+ with javac, but "
            f"{java} is a runtime without it; install a full JDK (e.g. Eclipse Temurin {JAVA_RELEASE}) "
            "and point ESBRIDGE_JAVA or JAVA_HOME at its bin/java"
        )
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{name}-build-") as tmp_name:
        tmp = Path(tmp_name)
        src, classes = tmp / "src", tmp / "classes"
        src.mkdir()
        classes.mkdir()
        descriptor: tuple[str, bytes] | None = None
        sources = []
        for fname, data in plugin_sources(name):
            if fname.endswith(".properties"):
                text = data.decode("utf-8").format(plugin_version=PLUGIN_VERSION, java_version=JAVA_RELEASE,
                                                   elasticsearch_version=es_version)
                descriptor = (fname, text.encode("utf-8"))
            else:
                (src / fname).write_bytes(data)
                sources.append(str(src / fname))
        if descriptor is None:
            raise ProvisioningError(f"the plugin {name!r} has no descriptor; reinstall esbridge")
        cmd = [str(javac), "--release", str(JAVA_RELEASE), "-encoding", "UTF-8", "-proc:none", "-nowarn",
               "-cp", str(es_home / "lib" / "*"), "-d", str(classes), *sources]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise ProvisioningError(f"compiling the {name} plugin failed:\n{(done.stderr or done.stdout)[-3000:]}")
        jar = tmp / f"{name}-{PLUGIN_VERSION}.jar"
        features_plugin.write_jar(jar, classes)
        part = out.with_suffix(".part")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.write(jar, jar.name)
            zf.writestr(descriptor[0], descriptor[1])
        os.replace(part, out)
    return out


def install_plugins(es_home: Path, es_version: str, java: str, cache: Path) -> dict[str, str]:
    """Build the plugins if needed and install those not installed at their current digest;
    return ``{plugin: digest}`` as installed."""
    marker = es_home.parent / "plugins.json"
    installed: dict[str, str] = json.loads(marker.read_text()) if marker.exists() else {}
    tool = es_home / "bin" / "elasticsearch-plugin"
    # esbridge-features: the candidates' features read in the engine (esbridge.nodes.features_plugin)
    features_jar = features_plugin.compile_jar("elasticsearch", es_version, es_home / "lib", java)
    for name in (*PLUGINS, features_plugin.PLUGIN_NAME):
        if name == features_plugin.PLUGIN_NAME:
            digest = features_jar.stem.rsplit("-", 1)[-1]
        else:
            digest = plugin_digest(name, es_version)
        if installed.get(name) == digest and (es_home / "plugins" / name).is_dir():
            continue
        if name == features_plugin.PLUGIN_NAME:
            archive = features_plugin.pack_zip("elasticsearch", es_version, features_jar, cache)
        else:
            archive = build_plugin(name, es_home, es_version, java, cache)
        if (es_home / "plugins" / name).exists():
            _run_tool([str(tool), "remove", "--purge", name], java, f"removing the old {name} plugin")
        _run_tool([str(tool), "install", "--batch", archive.resolve().as_uri()], java, f"installing the {name} plugin")
        installed[name] = digest
        marker.write_text(json.dumps(installed))
    return installed


def _run_tool(cmd: Sequence[str], java: str, doing: str, *, conf: Path | None = None,
              stdin: str | None = None, account: ServiceAccount | None = None) -> str:
    done = subprocess.run(as_account(account, cmd), capture_output=True, text=True, input=stdin,
                          env=tool_env(java, conf), stdin=None if stdin is not None else subprocess.DEVNULL)
    if done.returncode != 0:
        raise ProvisioningError(f"{doing} failed (exit code {done.returncode}): "
                                f"{(done.stderr or done.stdout).strip()[-1500:]}")
    return done.stdout


# ---------------------------------------------------------------------------
# One node: configuration, certificates, users
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Credentials:
    """How to reach a secured node (kept in its record, mode 0600)."""

    username: str
    password: str = field(repr=False)
    #: ``id:key`` of an API key created through the API (empty until the node first ran)
    api_key: str = field(default="", repr=False)

    def basic_header(self) -> str:
        import base64

        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (mode 0600 from the start)."""
    tmp = path.with_name(path.name + ".part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read_credentials(record: Path) -> Credentials | None:
    path = record / "credentials.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return Credentials(data["username"], data["password"], data.get("api_key", ""))


def save_credentials(record: Path, creds: Credentials) -> None:
    write_private(record / "credentials.json", json.dumps(
        {"username": creds.username, "password": creds.password, "api_key": creds.api_key}))


def config_text(name: str, run: Path, port: int, transport_port: int) -> str:
    """``elasticsearch.yml`` of a secured single node on 127.0.0.1."""
    lines = {
        "cluster.name": f"esbridge-{name}",
        "node.name": name,
        "path.data": str(run / "data"),
        "path.logs": str(run / "logs"),
        "network.host": "127.0.0.1",
        "http.port": str(port),
        "transport.port": str(transport_port),
        "discovery.type": "single-node",
        "action.destructive_requires_name": "true",
        "cluster.routing.allocation.disk.threshold_enabled": "false",
        "xpack.security.enabled": "true",
        "xpack.security.http.ssl.enabled": "true",
        "xpack.security.http.ssl.key": "certs/http.key",
        "xpack.security.http.ssl.certificate": "certs/http.crt",
        "xpack.security.http.ssl.certificate_authorities": "[certs/ca.crt]",
        # one node on the loopback interface: no transport TLS needed
        "xpack.security.transport.ssl.enabled": "false",
        "xpack.security.authc.api_key.enabled": "true",
    }
    return "# written by esbridge at every start\n" + "".join(f"{k}: {v}\n" for k, v in lines.items())


def prepare_node(
    *,
    name: str,
    record: Path,
    run: Path,
    es_home: Path,
    java: str,
    port: int,
    transport_port: int,
    heap: str,
    account: ServiceAccount | None,
) -> Credentials:
    """Lay out the node's configuration under ``run`` (certificates and the superuser made the
    first time) and return its credentials.

    Args:
        record: the node's record directory under ``$ESBRIDGE_HOME`` (credentials, CA).
        run: the node's own directory (config, data, logs, tmp), the service account's.
    """
    conf = run / "config"
    fresh = not (conf / "jvm.options").exists()
    if fresh:
        if conf.exists():
            shutil.rmtree(conf)
        shutil.copytree(es_home / "config", conf)
    for d in ("data", "logs", "tmp"):
        (run / d).mkdir(parents=True, exist_ok=True)
    (conf / "elasticsearch.yml").write_text(config_text(name, run, port, transport_port))
    (conf / "jvm.options.d").mkdir(exist_ok=True)
    (conf / "jvm.options.d" / "esbridge.options").write_text(f"-Xms{heap}\n-Xmx{heap}\n")
    _certificates(record, conf, es_home, java)
    creds = read_credentials(record)
    if creds is None or not _user_file_has(conf, creds.username):
        creds = Credentials(SUPERUSER, secrets.token_urlsafe(24))
        for f in ("users", "users_roles"):
            (conf / f).write_text("")
        pw = creds.password
        _run_tool([str(es_home / "bin" / "elasticsearch-users"), "useradd", creds.username, "-r", "superuser"],
                  java, f"creating the node's superuser {creds.username!r}", conf=conf, stdin=f"{pw}\n{pw}\n")
        save_credentials(record, creds)
    chown_tree(run, account)
    return creds


def _user_file_has(conf: Path, user: str) -> bool:
    users = conf / "users"
    return users.exists() and any(line.split(":", 1)[0] == user for line in users.read_text().splitlines())


def _certificates(record: Path, conf: Path, es_home: Path, java: str) -> None:
    """A CA (its key kept in ``record`` only) and an HTTP certificate for 127.0.0.1 and
    localhost signed by it, made once with ``bin/elasticsearch-certutil``."""
    certs = conf / "certs"
    ca_crt, ca_key = record / "ca.crt", record / "ca.key"
    if ca_crt.exists() and ca_key.exists() and (certs / "http.crt").exists() and (certs / "http.key").exists():
        return
    certutil = str(es_home / "bin" / "elasticsearch-certutil")
    certs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="esbridge-certs-") as tmp_name:
        tmp = Path(tmp_name)
        _run_tool([certutil, "ca", "--pem", "--silent", "--days", "3650", "--ca-dn", "CN=esbridge local node CA",
                   "--out", str(tmp / "ca.zip")], java, "making the node's certificate authority", conf=conf)
        _unzip_to(tmp / "ca.zip", tmp)
        _run_tool([certutil, "cert", "--pem", "--silent", "--days", "3650", "--name", "http",
                   "--ca-cert", str(tmp / "ca" / "ca.crt"), "--ca-key", str(tmp / "ca" / "ca.key"),
                   "--ip", "127.0.0.1", "--dns", "localhost", "--out", str(tmp / "http.zip")],
                  java, "making the node's HTTP certificate", conf=conf)
        _unzip_to(tmp / "http.zip", tmp)
        write_private(ca_key, (tmp / "ca" / "ca.key").read_text())
        ca_crt.write_text((tmp / "ca" / "ca.crt").read_text())
        ca_crt.chmod(0o644)
        shutil.copyfile(tmp / "ca" / "ca.crt", certs / "ca.crt")
        shutil.copyfile(tmp / "http" / "http.crt", certs / "http.crt")
        write_private(certs / "http.key", (tmp / "http" / "http.key").read_text())


def _unzip_to(archive: Path, dest: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        for member in zf.namelist():
            if ".." in Path(member).parts or member.startswith("/"):
                raise ProvisioningError(f"{archive.name}: unexpected entry {member!r}")
        zf.extractall(dest)


def launch_command(es_home: Path, run: Path, account: ServiceAccount | None) -> list[str]:
    """The command that starts the node in the foreground (writing the server's pid)."""
    return as_account(account, [str(es_home / "bin" / "elasticsearch"), "-p", str(run / "es.pid")])


def launch_env(java: str, run: Path, account: ServiceAccount | None) -> dict[str, str]:
    env = tool_env(java, run / "config")
    env.pop("CLI_JAVA_OPTS")
    env["ES_TMPDIR"] = str(run / "tmp")
    env["HOME"] = str(account.home if account is not None else Path.home())
    return env


def server_pid(run: Path) -> int | None:
    """The server's process id from its pid file (``None`` until it writes it)."""
    try:
        return int((run / "es.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def api_key_request(name: str) -> Mapping[str, Any]:
    """The body of ``POST /_security/api_key`` for the node's key (the superuser's rights)."""
    return {"name": f"esbridge-{name}", "metadata": {"created_by": "esbridge"}}

