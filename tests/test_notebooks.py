"""The walkthrough and tuning notebooks run top to bottom under papermill, real models.

They use the embedded llama-server models (the README's test command prepares them) and
the shipped synthetic corpus; the tuning notebook runs without widgets, as under CI.
"""

from __future__ import annotations

import json

import pytest

from skillsynth.config import load_thresholds
from skillsynth.evaluation.sweeps.notebooks import execute_notebook, find_notebook


def _run(name, out, **params):
    # a per-cell limit turns a stuck kernel into this test's failure, not a hung suite
    execute_notebook(find_notebook(name), out, params, cwd=out.parent, timeout_s=600)


NOTEBOOKS = ("walkthrough", "tuning", "sweep_point", "report")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_notebook_matches_its_jupytext_source(name):
    # The .py (jupytext percent format) is the reviewable source; the paired .ipynb is what
    # papermill runs. Cell kinds, sources and the parameters tag must be the same.
    import jupytext
    import nbformat

    ipynb = find_notebook(f"{name}.ipynb")
    source = jupytext.read(ipynb.with_suffix(".py"), fmt="py:percent")
    shipped = nbformat.read(ipynb, as_version=4)

    def cells(nb):
        return [(c.cell_type, c.source.strip(), "parameters" in c.metadata.get("tags", ()))
                for c in nb.cells]

    assert cells(shipped) == cells(source), \
        f"{ipynb.name} and {name}.py differ: run `jupytext --sync notebooks/*.py`"
    assert sum(p for _, _, p in cells(shipped)) == 1  # exactly one papermill parameters cell


def test_an_unknown_notebook_is_an_error_listing_the_shipped_ones():
    from skillsynth.errors import SkillsynthError

    with pytest.raises(SkillsynthError, match="no notebook 'nope.ipynb'.*report.ipynb"):
        find_notebook("nope.ipynb")


@pytest.mark.notebooks
@pytest.mark.models
def test_walkthrough_runs_from_an_empty_folder_to_kpis(tmp_path):
    work = tmp_path / "walk"
    _run("walkthrough.ipynb", tmp_path / "walkthrough.ipynb", workdir=str(work))
    summary = json.loads((work / "point" / "summary.json").read_text())
    assert summary["split"]["probes"] == 8 and "recall_hit_rate" in summary["kpis"]
    assert (work / "history.db").exists() and (work / "corpus.db").exists()
    nb = json.loads((tmp_path / "walkthrough.ipynb").read_text())
    text = json.dumps(nb["cells"])
    assert "RECALLED PROCEDURES" in text or "nothing recalled for this goal" in text


@pytest.mark.notebooks
@pytest.mark.models
@pytest.mark.parametrize("method", ["agglomerative", "gaia-greedy"])
def test_tuning_notebook_runs_without_widgets_and_writes_settings(tmp_path, method):
    out = tmp_path / "memory_settings.json"
    _run("tuning.ipynb", tmp_path / "tuning.ipynb", workdir=str(tmp_path / "tune"),
         interactive=False, settings_out=str(out), similarity_tau=0.35, min_occurrences=2,
         method=method)
    th = load_thresholds(out, env={})
    assert (th.similarity_tau, th.min_occurrences) == (0.35, 2)
    text = json.dumps(json.loads((tmp_path / "tuning.ipynb").read_text())["cells"])
    assert "pair_precision" in text and "largest injected block" in text


@pytest.mark.notebooks
@pytest.mark.models
def test_tuning_notebook_builds_its_widgets(tmp_path):
    import ipywidgets  # noqa: F401  (the notebooks extra; the README's test command installs it)

    _run("tuning.ipynb", tmp_path / "tuning.ipynb", workdir=str(tmp_path / "tune"),
         interactive=True, distill_first=False, similarity_tau=0.3)
    cells = json.loads((tmp_path / "tuning.ipynb").read_text())["cells"]
    outputs = [o for c in cells for o in c.get("outputs", [])]
    assert not any(o.get("output_type") == "error" for o in outputs)
    widget_cell = next(c for c in cells if "import ipywidgets" in "".join(c["source"]))
    data = [o.get("data", {}) for o in widget_cell["outputs"]]
    assert any("application/vnd.jupyter.widget-view+json" in d for d in data), \
        "the widget box was not displayed"
    # the view's parts are displayed under the widgets (histogram, tables, injected block)
    assert any("image/png" in d for d in data)
    assert any("largest injected block" in "".join(d.get("text/plain", "")) for d in data)
    # at the parameters' values (moving the controls is tested without a kernel in
    # tests/test_tuning.py::test_the_tuning_app_renders_and_its_widgets_rerender_in_place)
    text = ["".join(d.get("text/plain", "")) for d in data]
    assert any("'tau': 0.3," in t for t in text), text
