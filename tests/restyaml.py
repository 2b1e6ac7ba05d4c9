"""A small runner of the engines' REST API YAML tests (the ``rest-api-spec/test`` suites of
OpenSearch's ``rest-api-spec`` jar), running each test against a node and against ``esbridge
serve`` in front of it (``tests/engine/test_rest_yaml.py``).

A test file holds YAML documents: ``setup`` (steps run before each test), ``teardown`` (after
each) and named tests.  A step is one of:

* ``do``: one API call, named as in the jar's ``rest-api-spec/api/*.json`` (which give its paths,
  methods and parts; the path with the most parts given is taken, the other arguments go in the
  query string); with ``catch`` (the error expected: ``bad_request``, ``missing``, ``request``,
  ... or a ``/regex/`` the error body must match), ``headers``, ``ignore`` (statuses that are no
  error); ``warnings``, ``allowed_warnings`` are tolerated (not checked), ``node_selector`` is
  ignored;
* ``match``, ``length``, ``is_true``, ``is_false``, ``gt``, ``gte``, ``lt``, ``lte``,
  ``contains``, ``close_to`` on a dotted path of the last response (``\\.`` a dot in a key, a
  number an array's item, ``$name`` a value kept by ``set``); a ``/regex/`` (verbose) matches a string;
* ``set`` (keep a value of the last response under a name), ``skip`` (the whole file in
  ``setup``, else one test: by the node's ``version`` ranges, where Elasticsearch's 6.x and 7.x
  come before every OpenSearch version as in OpenSearch's runner, or by ``features`` this runner
  does not have, :data:`FEATURES`: counted as skipped).

The node is shared with other work, so the runner differs from the engines' own: after each test
it deletes only the indices that test created (those that appeared during it and that its file
names), never every index; a test that changes cluster settings is skipped
(:data:`SHARED_NODE_APIS`); a search, count or msearch of every index (no index, ``_all`` or
``*``) is sent as one of the indices the test created, which is what it searches on a node of its
own.  And to keep the run short, a test that only searches runs against the node and the server
on one run of ``setup``, shared with the tests before it that only search
(:meth:`Runner.run_file`).

The jar is downloaded from Maven Central (``$ESBRIDGE_MAVEN_REPO``) as esbridge downloads its
runners' jars, its SHA-1 checked, and kept in the cache directory (:func:`spec_jar`).
"""

from __future__ import annotations

import http.client
import json
import math
import re
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import yaml

#: The jar of the YAML tests and API specs: org.opensearch:rest-api-spec:3.1.0, by SHA-1.
SPEC_ARTIFACT = ("org.opensearch", "rest-api-spec", "3.1.0", "04474b827106b5f5c5b3148921e0bdbbc4b0d67c")
#: Test features this runner has (a ``skip`` naming another skips the test).
FEATURES = frozenset({"headers", "warnings", "allowed_warnings", "allowed_warnings_regex", "warnings_regex",
                      "node_selector", "contains", "close_to", "stash_in_path", "stash_in_key"})
#: APIs that change what every user of a node sees: a test calling one is skipped on the shared node.
SHARED_NODE_APIS = frozenset({"cluster.put_settings"})
#: APIs whose request of every index is sent as one of the indices the test created.
ALL_INDICES_APIS = frozenset({"search", "count", "msearch"})
#: APIs that leave the node as they found it: tests calling only these share a run of ``setup``.
READ_APIS = frozenset({"search", "msearch", "count"})
#: The keys of a ``do`` that are not the API called.
DO_OPTIONS = frozenset({"catch", "headers", "warnings", "allowed_warnings", "allowed_warnings_regex",
                        "warnings_regex", "node_selector"})
#: ``catch`` values and the statuses they take.
CATCHES = {"bad_request": (400,), "unauthorized": (401,), "forbidden": (403,), "missing": (404,),
           "request_timeout": (408,), "conflict": (409,), "unavailable": (503,)}


# ---- the jar ---------------------------------------------------------------------------------

def spec_jar() -> Path:
    """The jar, downloaded once into ``<cache>/rest-api-spec/`` and checked against its SHA-1."""
    import os

    from esbridge.home import cache_dir
    from esbridge.nodes.artifacts import DEFAULT_MAVEN_REPO, Artifact, _fetch

    group, name, version, sha1 = SPEC_ARTIFACT
    art = Artifact(group, name, version, None, sha1)
    dest = cache_dir() / "rest-api-spec"
    dest.mkdir(parents=True, exist_ok=True)
    _fetch(art, dest, os.environ.get("ESBRIDGE_MAVEN_REPO", DEFAULT_MAVEN_REPO), timeout=120.0)
    return dest / art.filename


class _Loader(yaml.SafeLoader):
    """YAML read as the engines' runners read it: only ``true``/``false`` are booleans, numbers
    with an exponent are numbers, dates and ``yes``/``on`` stay strings."""


_Loader.yaml_implicit_resolvers = {k: [(tag, rx) for tag, rx in v if tag not in (
    "tag:yaml.org,2002:bool", "tag:yaml.org,2002:float", "tag:yaml.org,2002:int", "tag:yaml.org,2002:timestamp")]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:float",
                              re.compile(r"^[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?$"
                                         r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"), list("-+0123456789."))


@dataclass(frozen=True)
class Api:
    """One API of the spec: its paths (``/{index}/_search``) with their methods, and whether its
    body is newline-delimited JSON."""

    paths: tuple[tuple[str, tuple[str, ...]], ...]
    ndjson: bool


@dataclass
class Spec:
    """The APIs of the jar, by name, and its test files, by suite."""

    apis: dict[str, Api]
    tests: dict[str, dict[str, str]]

    @classmethod
    def load(cls, jar: Path, suites: tuple[str, ...]) -> Spec:
        apis: dict[str, Api] = {}
        tests: dict[str, dict[str, str]] = {s: {} for s in suites}
        with zipfile.ZipFile(jar) as zf:
            for name in zf.namelist():
                if name.startswith("rest-api-spec/api/") and name.endswith(".json") and "/_" not in name:
                    for api, spec in json.loads(zf.read(name)).items():
                        paths = tuple((p["path"], tuple(p["methods"])) for p in spec["url"]["paths"])
                        apis[api] = Api(paths, (spec.get("body") or {}).get("serialize") == "bulk")
                parts = name.split("/")
                if len(parts) == 4 and parts[1] == "test" and parts[2] in tests and name.endswith((".yml", ".yaml")):
                    tests[parts[2]][parts[3]] = zf.read(name).decode("utf-8")
        return cls(apis, tests)


# ---- running ---------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one test of one file came to: ``passed``, ``failed`` (with why) or ``skipped`` (why)."""

    suite: str
    file: str
    test: str
    status: str
    detail: str = ""

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.file} [{self.test}]"


class Failure(AssertionError):
    pass


class Skip(Exception):
    pass


@dataclass
class Response:
    status: int
    text: str
    body: Any


_MISSING = object()


def _version(text: str) -> tuple[int, ...]:
    """A version to compare, as OpenSearch's runner compares them: Elasticsearch's versions the
    tests still name (6.x, 7.x: ``" - 7.99.99"``) come before every OpenSearch version."""
    numbers = tuple(int(p) for p in re.findall(r"\d+", text)[:3])
    return (0 if numbers and numbers[0] >= 6 else 1, *numbers)


def _skipped_by_version(ranges: str, version: tuple[int, ...]) -> bool:
    if ranges.strip() == "all":
        return True
    for item in ranges.split(","):
        low, _, high = item.partition("-")
        if (not low.strip() or _version(low) <= version) and (not high.strip() or version <= _version(high)):
            return True
    return False


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return expected == actual if isinstance(expected, int) and isinstance(actual, int) \
            else float(expected) == float(actual)
    if isinstance(expected, str) and len(expected.strip()) > 2 and expected.strip()[0] == expected.strip()[-1] == "/":
        return isinstance(actual, str) and re.search(expected.strip()[1:-1], actual, re.X) is not None
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and set(expected) == set(actual) and all(
            _same(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and all(
            _same(e, a) for e, a in zip(expected, actual))
    return bool(expected == actual)


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit] + "..."


class Runner:
    """Runs test files against each of ``targets`` (a label and a URL: the node, a server in front
    of it); ``admin`` is the node itself, for what the runner asks to keep the shared node clean
    (the indices there, their deletion)."""

    def __init__(self, spec: Spec, targets: Mapping[str, str], admin: str,
                 headers: Mapping[str, str] | None = None) -> None:
        self.spec = spec
        self.headers = dict(headers or {})
        self._conns: dict[str, http.client.HTTPConnection] = {}
        self.targets, self.admin = dict(targets), admin
        self.version = _version(self.call(admin, "GET", "/").body["version"]["number"])
        self.stash: dict[str, Any] = {}
        self.last: Response | None = None
        self._file_text = ""
        self._before: set[str] = set()
        self._created: list[str] | None = None

    # -- HTTP

    def call(self, base: str, method: str, path: str, body: bytes | None = None,
             headers: Mapping[str, str] | None = None) -> Response:
        parts = urlsplit(base)
        sent = {**self.headers, **(headers or {})}
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
        for attempt in (0, 1):
            conn = self._conns.get(base)
            if conn is None:
                conn = self._conns[base] = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
            try:
                conn.request(method, path, body=body, headers=sent)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.HTTPException, ConnectionError):
                conn.close()
                del self._conns[base]
                if attempt:
                    raise
        text = raw.decode("utf-8", "replace")
        try:
            parsed: Any = json.loads(text) if text.strip() else None
        except ValueError:
            parsed = text
        if method == "HEAD":
            parsed = resp.status == 200
        return Response(resp.status, text, parsed)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()

    # -- the node's indices

    def indices(self) -> set[str]:
        got = self.call(self.admin, "GET", "/_cat/indices?h=index&expand_wildcards=all&format=json")
        return {row["index"] for row in got.body}

    def created(self) -> list[str]:
        """The indices the running test created (appeared since it began, and named in its file)."""
        if self._created is None:
            self._created = sorted(i for i in self.indices() - self._before if i in self._file_text)
        return self._created

    def clean(self) -> None:
        for name in self.created():
            self.call(self.admin, "DELETE", f"/{quote(name, safe='')}?ignore_unavailable=true")
        self._created = None

    # -- a file

    def run_file(self, suite: str, name: str, text: str) -> dict[str, list[Outcome]]:
        """Each test of the file against each target, by target.  A test that only reads
        (:data:`READ_APIS`) runs against every target on one run of ``setup``, made straight on the
        node and shared with the tests before it that only read (the node holds what the setup
        made, as after a run of its own); any other test runs whole (setup, test, teardown) against
        each target in turn."""
        docs = [d for d in yaml.load_all(text, Loader=_Loader) if d]
        setup = next((d["setup"] for d in docs if "setup" in d), None) or []
        teardown = next((d["teardown"] for d in docs if "teardown" in d), None) or []
        tests = [(k, v or []) for d in docs for k, v in d.items() if k not in ("setup", "teardown")]
        self._file_text = text
        out: dict[str, list[Outcome]] = {label: [] for label in self.targets}
        fresh: dict[str, Any] | None = None  # the stash of the setup the node holds untouched, if it does
        for test, steps in tests:
            try:
                self._skip_check([*setup, *teardown, *steps])
            except Skip as why:
                for outcomes in out.values():
                    outcomes.append(Outcome(suite, name, test, "skipped", str(why)))
                continue
            if self._reads_only(steps):
                if fresh is None:
                    failed = self._attempt(lambda: self._setup(setup, self.admin))
                    if failed:
                        for outcomes in out.values():
                            outcomes.append(Outcome(suite, name, test, "failed", f"setup: {failed}"))
                        self._reset(teardown, self.admin, list(out.values()))
                        continue
                    fresh = dict(self.stash)
                for label, url in self.targets.items():
                    out[label].append(self._test(suite, name, test, [], steps, url, fresh))
                continue
            if fresh is not None:
                self._reset(teardown, self.admin, list(out.values()))
                fresh = None
            for label, url in self.targets.items():
                out[label].append(self._test(suite, name, test, setup, steps, url, None))
                self._reset(teardown, url, [out[label]])
        if fresh is not None:
            self._reset(teardown, self.admin, list(out.values()))
        return out

    @staticmethod
    def _attempt(run: Any) -> str:
        """What went wrong running ``run()`` (a failed check, or any error), or ``""``."""
        try:
            run()
        except Exception as err:  # a test's failure, whatever it was
            return str(err) if isinstance(err, Failure) else f"{type(err).__name__}: {err}"
        return ""

    def _setup(self, setup: list[Any], url: str) -> None:
        self.stash, self.last, self._before, self._created = {}, None, self.indices(), None
        for step in setup:
            self._step(step, url)

    def _test(self, suite: str, name: str, test: str, setup: list[Any], steps: list[Any], url: str,
              stash: dict[str, Any] | None) -> Outcome:
        started = time.perf_counter()

        def run() -> None:
            if stash is None:
                self._setup(setup, url)
            else:
                self.stash, self.last = dict(stash), None
            for step in steps:
                self._step(step, url)

        failed = self._attempt(run)
        if failed:
            return Outcome(suite, name, test, "failed", failed)
        return Outcome(suite, name, test, "passed", f"{time.perf_counter() - started:.2f}s")

    @staticmethod
    def _reads_only(steps: list[Any]) -> bool:
        return all(api in READ_APIS for step in steps if "do" in step for api in step["do"]
                   if api not in DO_OPTIONS)

    def _reset(self, teardown: list[Any], url: str, outs: list[list[Outcome]]) -> None:
        """Run ``teardown`` and delete what the tests since the setup created; a failure there is the
        last test's (of each list of ``outs``)."""
        failed = self._attempt(lambda: [self._step(step, url) for step in teardown])
        self.clean()
        for outcomes in outs:
            if failed and outcomes and outcomes[-1].status == "passed":
                outcomes[-1].status, outcomes[-1].detail = "failed", f"teardown: {failed}"

    def _skip_check(self, steps: list[Any]) -> None:
        used = {api for step in steps if "do" in step for api in step["do"]}
        shared = sorted(used & SHARED_NODE_APIS)
        if shared:
            raise Skip(f"calls {shared[0]}, which changes the shared node for everyone")
        for step in steps:
            skip = step.get("skip")
            if not skip:
                continue
            features = skip.get("features") or []
            features = [features] if isinstance(features, str) else features
            missing = [f for f in features if f not in FEATURES]
            if missing:
                raise Skip(f"needs the runner feature {missing[0]}")
            if "version" in skip and _skipped_by_version(str(skip["version"]), self.version):
                raise Skip(f"version {skip['version']}: {skip.get('reason', '')}")

    # -- steps

    def _step(self, step: Mapping[str, Any], url: str) -> None:
        (kind, arg), = step.items()
        if kind == "skip":
            return
        if kind == "do":
            return self._do(arg, url)
        if kind == "set":
            for path, name in arg.items():
                self.stash[name] = self._value(path)
            return
        for path, expected in (arg.items() if isinstance(arg, Mapping) else [(arg, None)]):
            actual = self._value(path)
            expected = self._unstash(expected)
            shown = f"{kind} {path}: expected {_short(expected)}, got {_short(actual)}"
            if kind == "match":
                ok = actual is not _MISSING and _same(expected, actual)
            elif kind == "length":
                ok = isinstance(actual, (list, dict, str)) and len(actual) == int(expected)
            elif kind in ("is_true", "is_false"):
                falsy = actual in (_MISSING, None, False, "", 0, "false", "0")
                ok = falsy if kind == "is_false" else not falsy
                shown = f"{kind} {path}: got {_short(actual if actual is not _MISSING else 'nothing')}"
            elif kind in ("gt", "gte", "lt", "lte"):
                ok = isinstance(actual, (int, float)) and {"gt": actual > expected, "gte": actual >= expected,
                                                             "lt": actual < expected,
                                                             "lte": actual <= expected}[kind]
            elif kind == "contains":
                ok = isinstance(actual, list) and any(
                    _same(expected, a) or (isinstance(expected, Mapping) and isinstance(a, Mapping)
                                           and all(k in a and _same(v, a[k]) for k, v in expected.items()))
                    for a in actual)
            elif kind == "close_to":
                ok = isinstance(actual, (int, float)) and math.isclose(
                    actual, expected["value"], rel_tol=0, abs_tol=expected["error"])
            else:
                raise Failure(f"the runner has no step {kind!r}")
            if not ok:
                raise Failure(shown)

    def _unstash(self, value: Any) -> Any:
        if isinstance(value, str):
            if value.startswith("$") and value[1:] in self.stash:
                return self.stash[value[1:]]
            return re.sub(r"\$\{(\w+)\}", lambda m: str(self.stash.get(m.group(1), m.group(0))), value)
        if isinstance(value, Mapping):
            return {self._unstash(k): self._unstash(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._unstash(v) for v in value]
        return value

    def _value(self, path: str) -> Any:
        """The value at ``path`` of the last response (``$body``: all of it)."""
        assert self.last is not None, "a check before any call"
        value: Any = self.last.body
        if path == "$body":
            return value
        for key in (k.replace("\x00", ".") for k in path.replace("\\.", "\x00").split(".")):
            key = self._unstash(key)
            if isinstance(value, list) and re.fullmatch(r"\d+", str(key)) and int(key) < len(value):
                value = value[int(key)]
            elif isinstance(value, Mapping) and str(key) in value:
                value = value[str(key)]
            else:
                return _MISSING
        return value

    def _do(self, arg: Mapping[str, Any], url: str) -> None:
        arg = dict(arg)
        catch = arg.pop("catch", None)
        headers = {str(k): str(v) for k, v in (arg.pop("headers", None) or {}).items()}
        for key in DO_OPTIONS:
            arg.pop(key, None)
        (api_name, params), = arg.items()
        params = dict(self._unstash(params or {}))
        ignore = params.pop("ignore", [])  # a client's option: statuses that are no error
        ignore = {int(i) for i in (ignore if isinstance(ignore, list) else [ignore])}
        if api_name in ALL_INDICES_APIS and params.get("index") in (None, "", "_all", "*"):
            params["index"] = ",".join(self.created()) or "esbridge-yaml-no-index-*"
        method, path, body, ndjson = self._request(api_name, params)
        if ndjson:
            headers.setdefault("Content-Type", "application/x-ndjson")
        resp = self.call(url, method, path, body, headers)
        if api_name not in ALL_INDICES_APIS and not api_name.startswith(("cat.", "cluster.")):
            self._created = None  # what exists may have changed
        self.last = resp
        what = f"{api_name} {method} {path}"
        if catch is None:
            if resp.status >= 400 and method != "HEAD" and resp.status not in ignore:
                raise Failure(f"{what}: {resp.status} {_short(resp.text)}")
            return
        if resp.status < 400:
            raise Failure(f"{what}: expected an error ({catch}), got {resp.status} {_short(resp.text)}")
        if catch in CATCHES and resp.status not in CATCHES[catch]:
            raise Failure(f"{what}: expected {catch}, got {resp.status} {_short(resp.text)}")
        if catch.startswith("/") and re.search(catch.strip()[1:-1], resp.text) is None:
            raise Failure(f"{what}: error {resp.status} does not match {catch}: {_short(resp.text)}")

    def _request(self, api_name: str, params: dict[str, Any]) -> tuple[str, str, bytes | None, bool]:
        try:
            api = self.spec.apis[api_name]
        except KeyError:
            raise Failure(f"no API {api_name!r} in the spec") from None
        body = params.pop("body", None)
        best: tuple[int, str, tuple[str, ...]] | None = None
        for path, methods in api.paths:
            parts = re.findall(r"\{(\w+)\}", path)
            if all(p in params for p in parts) and (best is None or len(parts) > best[0]):
                best = (len(parts), path, methods)
        if best is None:
            raise Failure(f"{api_name}: no path of the spec takes {sorted(params)}")
        _, template, methods = best

        def text(v: Any) -> str:
            if isinstance(v, bool):
                return "true" if v else "false"
            if isinstance(v, list):
                return ",".join(text(x) for x in v)
            return str(v)

        used = set(re.findall(r"\{(\w+)\}", template))
        path = re.sub(r"\{(\w+)\}", lambda m: quote(text(params[m.group(1)]), safe=","), template)
        query = {k: text(v) for k, v in params.items() if k not in used}
        if query:
            path += "?" + urlencode(query)
        data: bytes | None = None
        if body is not None:
            if api.ndjson and isinstance(body, list):
                data = "".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in body).encode()
            elif isinstance(body, str):
                data = (body if not api.ndjson or body.endswith("\n") else body + "\n").encode()
            else:
                data = json.dumps(body).encode()
        method = methods[0]
        if data is not None and method in ("GET", "HEAD") and "POST" in methods:
            method = "POST"
        return method, path, data, api.ndjson


def run_suites(spec: Spec, targets: Mapping[str, str], admin: str, suites: tuple[str, ...],
               headers: Mapping[str, str] | None = None) -> dict[str, list[Outcome]]:
    """Every test of ``suites``' files against each of ``targets`` (:meth:`Runner.run_file`), by target."""
    runner = Runner(spec, targets, admin, headers)
    out: dict[str, list[Outcome]] = {label: [] for label in targets}
    try:
        for suite in suites:
            for name, text in sorted(spec.tests[suite].items()):
                for label, outcomes in runner.run_file(suite, name, text).items():
                    out[label] += outcomes
    finally:
        runner.close()
    return out


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    by_suite: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, outcomes: list[Outcome]) -> Counts:
        out = cls()
        for o in outcomes:
            setattr(out, o.status, getattr(out, o.status) + 1)
            suite = out.by_suite.setdefault(o.suite, {"passed": 0, "failed": 0, "skipped": 0})
            suite[o.status] += 1
        return out

    def __str__(self) -> str:
        per = "; ".join(f"{s} {c['passed']}/{c['failed']}/{c['skipped']}" for s, c in self.by_suite.items())
        return f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped ({per})"
