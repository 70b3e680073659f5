"""The embedded chat model registry and the assembly of split models from PyPI parts.

The parts here are tiny wheels built in the test (the real 0.5B model is assembled by the
README's test command and checked in test_models_local.py).
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from skillsynth.errors import ConfigError, ModelNotFound, PrepareError
from skillsynth.models import chat_models
from skillsynth.models.chat_models import (
    DEFAULT_CHAT_MODEL,
    ChatModelSpec,
    Part,
    assemble_parts,
    chat_model,
    chat_model_names,
    locate_chat_model,
)


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _spec(tmp_path: Path, chunks: list[bytes], *, corrupt: int | None = None,
          skip: int | None = None) -> tuple[ChatModelSpec, Path]:
    """A 'parts' spec over tiny wheels in ``tmp_path/wheels`` (one wheel per chunk)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    parts = []
    for i, data in enumerate(chunks, 1):
        pkg = f"tiny-model-part{i}"
        member = f"tiny_model_part{i}/data/part{i:02d}.bin"
        parts.append(Part(pkg, "0.1.0", member, len(data), _sha(data)))
        if i == skip:
            continue
        shipped = data if i != corrupt else data[:-1] + bytes([data[-1] ^ 1])
        with zipfile.ZipFile(wheels / f"tiny_model_part{i}-0.1.0-py3-none-any.whl", "w") as z:
            z.writestr(member, shipped)
    whole = b"".join(chunks)
    spec = ChatModelSpec("tiny", "Tiny-Q4", "parts", "MIT", len(whole), _sha(whole),
                         parts=tuple(parts))
    return spec, wheels


def test_registry_knows_the_three_models_and_the_default():
    assert set(chat_model_names()) == {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b",
                                       "smollm2-135m"}
    assert chat_model().name == DEFAULT_CHAT_MODEL
    q = chat_model("qwen2.5-coder-0.5b")
    # the figures the models issue gives for the assembled file
    q_sha = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert (q.size, q.sha256) == (491_400_064, q_sha)
    assert len(q.parts) == 6 and sum(p.size for p in q.parts) == q.size
    big = chat_model("qwen2.5-coder-1.5b")
    assert len(big.parts) == 22 and sum(p.size for p in big.parts) == big.size == 1_117_320_768
    # a model id works as well as a name
    assert chat_model(q.model_id) is q


def test_an_unknown_model_name_lists_the_known_ones():
    with pytest.raises(ConfigError, match="unknown embedded chat model 'gpt-5'.*smollm2-135m"):
        chat_model("gpt-5")


def test_parts_are_assembled_in_order_and_checked(tmp_path):
    spec, wheels = _spec(tmp_path, [b"alpha-", b"beta-", b"gamma"])
    dest = tmp_path / "models" / spec.filename
    assemble_parts(spec, wheels, dest, log=lambda _: None)
    assert dest.read_bytes() == b"alpha-beta-gamma"
    assert not dest.with_name(dest.name + ".partial").exists()


def test_a_missing_part_is_named_and_nothing_is_left(tmp_path):
    spec, wheels = _spec(tmp_path, [b"alpha-", b"beta-", b"gamma"], skip=2)
    dest = tmp_path / "models" / spec.filename
    with pytest.raises(PrepareError, match=r"part 2/3 \(tiny-model-part2==0.1.0\) is missing"):
        assemble_parts(spec, wheels, dest, log=lambda _: None)
    assert list(dest.parent.iterdir()) == []


def test_a_corrupt_part_is_named_with_its_expected_hash(tmp_path):
    spec, wheels = _spec(tmp_path, [b"alpha-", b"beta-", b"gamma"], corrupt=3)
    dest = tmp_path / "models" / spec.filename
    with pytest.raises(PrepareError, match=r"part 3/3 \(tiny-model-part3==0.1.0\) is corrupt"
                       ) as info:
        assemble_parts(spec, wheels, dest, log=lambda _: None)
    assert spec.parts[2].sha256 in str(info.value)
    assert not dest.exists()


def test_a_wheel_without_the_part_file_is_corrupt(tmp_path):
    spec, wheels = _spec(tmp_path, [b"alpha-", b"beta-"])
    bad = next(wheels.glob("tiny_model_part1-*.whl"))
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("tiny_model_part1/other.bin", b"alpha-")
    with pytest.raises(PrepareError, match="part 1/2 .* has no tiny_model_part1/data/part01"):
        assemble_parts(spec, wheels, tmp_path / "out.gguf", log=lambda _: None)


def test_locate_refuses_a_missing_or_changed_file(tmp_path, monkeypatch):
    spec, wheels = _spec(tmp_path, [b"alpha-", b"beta-"])
    monkeypatch.setattr(chat_models, "_registry", lambda: {"tiny": spec})
    home = tmp_path / "home"
    with pytest.raises(ModelNotFound, match="models prepare --chat tiny"):
        locate_chat_model("tiny", home)
    dest = home / "models" / spec.filename
    assemble_parts(spec, wheels, dest, log=lambda _: None)
    assert locate_chat_model("tiny", home) == dest
    dest.write_bytes(b"alpha-BETA-")  # same size, other bytes: the stamp no longer matches
    with pytest.raises(ModelNotFound, match="not a checked copy of tiny"):
        locate_chat_model("tiny", home)


def test_prepare_refuses_a_file_that_is_not_the_model(tmp_path, monkeypatch):
    spec, _ = _spec(tmp_path, [b"alpha-", b"beta-"])
    monkeypatch.setattr(chat_models, "_registry", lambda: {"tiny": spec})
    home = tmp_path / "home"
    dest = home / "models" / spec.filename
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"alpha-beta!")  # right size, wrong bytes, no stamp
    with pytest.raises(PrepareError, match="sha256 .* remove it and run"):
        chat_models.prepare_chat_model("tiny", home, log=lambda _: None)


def test_a_packaged_model_is_copied_into_the_home_and_outlives_its_package(tmp_path,
                                                                           monkeypatch):
    data = b"a tiny gguf"
    spec = ChatModelSpec("tiny", "Tiny-Q4", "package", "MIT", len(data), _sha(data),
                         package="tiny-pkg", version="1.0", member="m.gguf")
    monkeypatch.setattr(chat_models, "_registry", lambda: {"tiny": spec})
    venv_copy = tmp_path / "venv" / "m.gguf"  # where the package put it
    venv_copy.parent.mkdir()
    venv_copy.write_bytes(data)
    monkeypatch.setattr(chat_models, "ensure_package", lambda *a, **k: venv_copy)
    home = tmp_path / "home"
    path = chat_models.prepare_chat_model("tiny", home, log=lambda _: None)
    assert path == home / "models" / spec.filename and path.read_bytes() == data
    venv_copy.unlink()  # the virtual environment that installed the package is gone
    assert locate_chat_model("tiny", home) == path
