"""The tuning notebook's application: its views and widgets as a library object.

:class:`TuningApp` holds one :class:`~skillsynth.evaluation.tuning.session.TuningSession` per corpus (goals
embedded once each), renders the parts of a view (headline numbers, the similarity
histograms, qualified clusters, per-probe recalls, the injected block), and builds the
ipywidgets controls whose every move re-renders those parts in place. The notebook only
wires it to its parameters; tests drive it without a kernel by handing in their own
``display`` and moving the controls.

Parts are shown through display handles updated in place, never captured into an
``Output`` widget: under papermill, nbclient answers every captured output with a comm
message on the channel it is waiting on, which can block (nbclient #312).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...config import Thresholds
from ...errors import SkillsynthError
from ...pipeline.distill import DistillMode
from ...protocols import ChatModel
from .session import TuningSession, TuningView, plot_pairs, write_settings_block

__all__ = ["METHODS", "SLIDERS", "TuningApp"]

#: The cluster methods the method dropdown offers.
METHODS = ("agglomerative", "gaia-greedy", "hdbscan")
#: The threshold sliders: key -> (kind, min, max, step, label).
SLIDERS: dict[str, tuple[str, float, float, float, str]] = {
    "similarity_tau": ("float", 0.0, 1.0, 0.01, "tau"),
    "min_occurrences": ("int", 1, 10, 1, "min occ."),
    "min_success_rate": ("float", 0.0, 1.0, 0.05, "min rate"),
    "max_recall_body_chars": ("int", 100, 5000, 100, "body chars"),
    "recall_top_k": ("int", 1, 5, 1, "top k"),
}


def _display(obj: Any, **kwargs: Any) -> Any:
    from IPython.display import display

    return display(obj, **kwargs)


@dataclass
class TuningApp:
    """The tuning views over ``corpora``, and (with :meth:`show`) their widgets.

    Attributes:
        corpora: corpus databases (labelled, or a GAIA memory.db opened read-only).
        llm: the chat client; only :meth:`distill_missing` calls it, views use its cache.
        embedder: embeds each corpus's goals once.
        k: history attempts per task; attempt k+1 is the probe.
        mode: distillation mode.
        display: shows a part and returns a handle with ``update`` (IPython's by default).
    """

    corpora: Sequence[str]
    llm: ChatModel
    embedder: Any
    k: int = 3
    mode: DistillMode = "json"
    display: Callable[..., Any] = _display
    sessions: dict[str, TuningSession] = field(default_factory=dict)
    controls: dict[str, Any] = field(default_factory=dict)
    status: Any = None
    _slots: list[Any] = field(default_factory=list)

    def session(self, corpus: str) -> TuningSession:
        """The corpus's session (its goals are embedded the first time only)."""
        if corpus not in self.sessions:
            self.sessions[corpus] = TuningSession.prepare(corpus, self.embedder, k=self.k)
        return self.sessions[corpus]

    def parts(self, corpus: str, config: Thresholds, method: str
              ) -> tuple[TuningView, list[Any]]:
        """The view at these settings and its parts in display order."""
        import matplotlib.pyplot as plt
        from IPython.display import Pretty

        ts = self.session(corpus)
        view = ts.view(config, method, llm=self.llm, mode=self.mode)  # type: ignore[arg-type]
        fig, ax = plt.subplots(figsize=(7, 3))
        plot_pairs(ts.pairs, config.similarity_tau, ax=ax)
        plt.close(fig)  # shown through display(), not a second time at the end of a cell
        text = (f"largest injected block: {view.prompt.chars} characters, about "
                f"{view.prompt.tokens_estimate} tokens (estimate: characters / 4), "
                f"{view.prompt.truncated} body(ies) cut\n\n"
                + (view.prompt.block or "(nothing recalled at these thresholds)"))
        return view, [view.summary(), fig, view.clusters_frame(ts.families),
                      view.recalls_frame(), Pretty(text)]

    def render(self, corpus: str, config: Thresholds, method: str) -> TuningView:
        """Show the parts (first call) or update the shown ones in place; returns the view."""
        view, parts = self.parts(corpus, config, method)
        if not self._slots:
            self._slots = [self.display(p, display_id=True) for p in parts]
        else:
            for slot, part in zip(self._slots, parts, strict=True):
                slot.update(part)
        return view

    # -- widgets ------------------------------------------------------------------
    def current(self) -> Thresholds:
        """The thresholds the sliders show."""
        return Thresholds().merge({k: self.controls[k].value for k in SLIDERS})

    def refresh(self, _: Any = None) -> TuningView:
        """Re-render for the controls' values (every control's observer)."""
        return self.render(self.controls["corpus"].value, self.current(),
                           self.controls["method"].value)

    def write_settings(self, _: Any = None) -> str:
        """Write the sliders' thresholds to the settings path; the status says what happened."""
        try:
            written = write_settings_block(self.current(), self.controls["path"].value,
                                           overwrite=self.controls["overwrite"].value)
            self.status.value = f"written: {written}"
        except SkillsynthError as exc:  # shown to the user, not raised inside the widget
            self.status.value = f"not written: {exc}"
        return str(self.status.value)

    def distill_missing(self, _: Any = None) -> int:
        """Distil the clusters the cache lacks at the current settings (the LLM call)."""
        n = self.session(self.controls["corpus"].value).distill_missing(
            self.current(), self.llm, self.controls["method"].value, self.mode)
        self.status.value = f"distilled {n} cluster(s)"
        self.refresh()
        return n

    def show(self, start: Thresholds, method: str, settings_path: str | Path) -> Any:
        """Build the controls at ``start``, display them and the view under them.

        Raises:
            ImportError: ipywidgets is not installed (the ``notebooks`` extra).
        """
        import ipywidgets as w

        c = {"continuous_update": False}
        self.controls = {
            "corpus": w.Dropdown(options=list(self.corpora), value=self.corpora[0],
                                 description="corpus"),
            "method": w.Dropdown(options=list(METHODS), value=method, description="method")}
        for key, (kind, lo, hi, step, label) in SLIDERS.items():
            slider = w.FloatSlider if kind == "float" else w.IntSlider
            self.controls[key] = slider(value=getattr(start, key), min=lo, max=hi, step=step,
                                        description=label, **c)
        self.controls["path"] = w.Text(value=str(settings_path), description="settings")
        self.controls["overwrite"] = w.Checkbox(value=False, description="overwrite")
        save = w.Button(description="Write settings")
        more = w.Button(description="Distil missing (LLM)")
        self.status = w.Label()
        for key in ("corpus", "method", *SLIDERS):
            self.controls[key].observe(self.refresh, names="value")
        save.on_click(self.write_settings)
        more.on_click(self.distill_missing)
        ui = self.controls
        box = w.VBox([w.HBox([ui["corpus"], ui["method"]]),
                      w.HBox([ui["similarity_tau"], ui["min_occurrences"]]),
                      w.HBox([ui["min_success_rate"], ui["max_recall_body_chars"]]),
                      w.HBox([ui["recall_top_k"], more]),
                      w.HBox([ui["path"], ui["overwrite"], save]), self.status])
        self.display(box)
        self._slots = []
        self.refresh()
        return box
