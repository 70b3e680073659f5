"""The notebooks live at the repository's top level and ship in the wheel as package data.

pyproject.toml lists every package by hand (one, ``skillsynth.notebooks``, is built from the
top-level ``notebooks/`` folder), so a new package or notebook left out of it would be missing
from the wheel while every checkout test still passes; these tests read that configuration.
The installed wheel running a sweep and a report is scripts/check_wheel.sh's (CI, models).
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from skillsynth.errors import EvaluationError
from skillsynth.evaluation.sweeps.notebooks import find_notebook, notebooks_folder

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _notebook_files() -> dict[str, bytes]:
    """The files the wheel must carry: each notebook and its jupytext source."""
    return {p.name: p.read_bytes() for p in sorted(NOTEBOOKS.iterdir())
            if p.suffix in (".ipynb", ".py")}


def test_every_package_folder_is_listed_for_the_wheel():
    folders = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "skillsynth").rglob("*")
               if p.suffix in (".py", ".json") and "__pycache__" not in p.parts}
    assert set(SETUPTOOLS["packages"]) == folders | {"skillsynth.notebooks"}
    assert SETUPTOOLS["package-dir"] == {"skillsynth.notebooks": "notebooks"}


def test_every_notebook_is_package_data_and_paired_with_its_source():
    globs = SETUPTOOLS["package-data"]["skillsynth.notebooks"]
    notebooks = sorted(p for p in NOTEBOOKS.glob("*.ipynb"))
    assert notebooks, "no notebooks at the top level"
    for nb in notebooks:
        assert any(fnmatch.fnmatch(nb.name, g) for g in globs), f"{nb.name} not in {globs}"
    # the .py sources ship as the package's modules; each pairs with exactly one notebook
    assert {p.stem for p in NOTEBOOKS.glob("*.py")} == {p.stem for p in notebooks}


def test_a_checkout_finds_every_top_level_notebook():
    assert notebooks_folder() == NOTEBOOKS
    for nb in NOTEBOOKS.glob("*.ipynb"):
        assert find_notebook(nb.name) == nb


def _package(root: Path, *, checkout: bool, shipped: bool, top_level: bool) -> Path:
    package = root / "skillsynth"
    package.mkdir(parents=True)
    if checkout:
        (root / "pyproject.toml").write_text("[project]\nname = 'skillsynth'\n")
    for folder, wanted in ((package / "notebooks", shipped), (root / "notebooks", top_level)):
        if wanted:
            folder.mkdir()
            (folder / "report.ipynb").write_text("{}")
    return package


def test_where_skillsynth_was_imported_from_decides_the_folder(tmp_path):
    wheel = _package(tmp_path / "site", checkout=False, shipped=True, top_level=False)
    assert notebooks_folder(wheel) == wheel / "notebooks"
    # a stray copy inside a checkout's package folder is never run
    checkout = _package(tmp_path / "repo", checkout=True, shipped=True, top_level=True)
    assert notebooks_folder(checkout) == tmp_path / "repo" / "notebooks"
    # an installed wheel does not pick up a notebooks/ folder that happens to sit beside it
    beside = _package(tmp_path / "site2", checkout=False, shipped=True, top_level=True)
    assert notebooks_folder(beside) == beside / "notebooks"


@pytest.mark.parametrize("checkout", [True, False])
def test_notebooks_in_neither_place_is_an_error_naming_both(tmp_path, checkout):
    package = _package(tmp_path, checkout=checkout, shipped=False, top_level=False)
    with pytest.raises(EvaluationError) as err:
        notebooks_folder(package)
    assert str(tmp_path / "notebooks") in str(err.value)
    assert str(package / "notebooks") in str(err.value)


@pytest.mark.slow
def test_the_built_wheel_carries_the_top_level_notebooks_and_finds_them_there(tmp_path):
    # pip builds the wheel as a release would (isolated build environment)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(tmp_path / "dist"), str(ROOT)], check=True)
    (wheel,) = (tmp_path / "dist").glob("skillsynth-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    shipped = site / "skillsynth" / "notebooks"
    assert {p.name: p.read_bytes() for p in shipped.iterdir()} == _notebook_files()
    # the unpacked wheel first on the path, run from outside the checkout
    env = os.environ | {"PYTHONPATH": str(site)}
    code = ("import skillsynth.evaluation.sweeps.notebooks as n; "
            "print(n.find_notebook('sweep_point.ipynb'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True,
                         capture_output=True, text=True).stdout
    assert Path(out.strip()).resolve() == (shipped / "sweep_point.ipynb").resolve()
