"""Reports over a sweep run: tables, PNG plots and the HTML report.

Everything here reads the run folder :func:`~skillsynth.evaluation.sweeps.run.run_sweep` wrote;
nothing calls a model. The report notebook (``notebooks/report.ipynb``) is a
sequence of calls to these functions; :func:`render_report` executes it and writes HTML.
The gate and baselines are :mod:`.gate` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...pipeline.skill import PROFILES
from ..point.metrics import MIN_FAMILIES
from ..point.summary import CorpusInfo, ModelCalls, Versions
from .gate import PARAMS, PROTOCOL_DEFAULTS, GateCheck, gate, gate_checks, write_baseline
from .loaded import Run, load_run

__all__ = [
    "GateCheck",
    "Run",
    "baseline_table",
    "describe_run",
    "gate",
    "kpi_table",
    "live_runs_table",
    "load_run",
    "peer_table",
    "plot_body_chars",
    "plot_heatmaps",
    "plot_similarity",
    "protocol_table",
    "recommended_settings",
    "render_report",
    "similarity_table",
    "validity_table",
    "verdict_table",
    "write_baseline",
]

_SHOWN = ("synthesis_fired_rate", "recall_hit_rate", "recall_precision", "step_reduction",
          "share_made_worse", "live_step_reduction", "live_decision_reduction",
          "live_success_change", "live_share_made_worse", "live_share_success_lost",
          "live_prompt_token_change", "step_reduction_live_probes", "validity_gaia691",
          "validity_agentskills",
          "grounded_tools_rate", "duplicate_name_count", "provenance_integrity",
          "floors_behaved", "llm_calls", "cache_hit_rate")


def _fmt(value: Any, lo: Any, hi: Any, n: Any, estimate: Any = False,
         families: Any = None) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return f"n/a (n={0 if pd.isna(n) else int(n)})"
    ci = "" if lo is None or (isinstance(lo, float) and np.isnan(lo)) else \
        f" [{lo:.2f}, {hi:.2f}]"
    fams = "" if families is None or pd.isna(families) else \
        f" ({int(families)} famil{'y' if int(families) == 1 else 'ies'})"
    return f"{value:.2f}{ci} n={int(n)}{fams}{' est.' if estimate else ''}"


def _failed_lines(failed: Mapping[str, str]) -> str:
    """One line per point that did not finish: it is missing from every table below."""
    return "".join(f"**Missing** `{pid}` (no KPI of it is reported): "
                   f"{why.splitlines()[0][:300] if why else 'no cause recorded'}  \n"
                   for pid, why in failed.items())


def _history_words(split: Mapping[str, Any]) -> str:
    """The history a point's probes were recalled against, in words, for either protocol."""
    if split.get("protocol") == "rolling":
        return (f"{split.get('sessions')} sessions replayed in time order (each probe against "
                "the sessions before it)")
    if split.get("history") is None:
        return "history size not recorded"
    return f"{split.get('history')} history sessions"


def describe_run(run: Run) -> str:
    """A Markdown paragraph: what was run, on what, with which models."""
    s = run.summary
    first = s.points[0] if s.points else None
    corpus, versions = (first.corpus, first.versions) if first else (CorpusInfo(), Versions())
    split = first.split if first else {}
    return (f"**Run** `{s.name}`: {s.finished} of {s.n_points} point(s) finished"
            f"{f', {len(s.failed)} failed' if s.failed else ''}.  \n"
            f"{_failed_lines(s.failed)}"
            f"**Corpus** `{corpus.path}` (sha256 `{str(corpus.sha256)[:12]}`): "
            f"{_history_words(split)}, {split.get('probes')} probes "
            f"(attempt {split.get('k', 3) + 1} of each task).  \n"
            f"**Models**: chat `{versions.chat_model}`, embedder "
            f"`{versions.embedder}`; distill prompt `{versions.distill_prompt}`, "
            f"replay rule `{versions.replay_rule}`, skillsynth "
            f"{versions.skillsynth}.  \n"
            "Intervals (95%, clustered by task family): Wilson on the effective sample "
            "size for shares, cluster bootstrap for means (cluster-level t below "
            f"{MIN_FAMILIES} families, none for one; a Wilson bound where no value "
            "differs). *est.* marks replay estimates "
            "(METHODS.md 5).")


_LIVE_COLS = ("point", "task_id", "arm", "repeat", "recalled", "steps", "failed_calls",
              "turns", "termination", "reward", "prompt_tokens", "completion_tokens", "wall_s")


def live_runs_table(run: Run) -> pd.DataFrame:
    """Every live run of every point (each point's ``runs.jsonl``): one row per run.

    Empty when no point ran the live agent.
    """
    recs = [{**{k: r.get(k) for k in _LIVE_COLS}, "point": pt.id, "world": r.get("world"),
             "recalled": len(r.get("recalled_ids") or [])}
            for pt in run.summary.points for r in run.point_runs(pt.id)]
    cols = [*_LIVE_COLS[:1], "world", *_LIVE_COLS[1:]]
    return pd.DataFrame(recs, columns=cols)


def verdict_table(run: Run) -> pd.DataFrame:
    """#887's acceptance criteria for the recommended point and for GAIA's defaults.

    One row per (configuration, criterion): target, measured value with interval, n and
    families, PASS / FAIL / INCONCLUSIVE / INSENSITIVE / NOT MEASURED and why, and what the
    figure is based on.
    """
    from .verdict import run_control, run_negative, verdict, verdict_points

    recs = [{"configuration": f"missing: {pid}", "criterion": "point finished",
             "status": "NOT MEASURED", "measured": "-",
             "why": (why.splitlines()[0][:300] if why else "no cause recorded"),
             "target": "the point ran to its end", "basis": "-",
             "note": "no KPI of it enters this report; re-run the sweep to complete it"}
            for pid, why in run.summary.failed.items()]
    points = run.summary.points
    for label, pt in verdict_points(points):
        for row in verdict(pt, run_control(points, pt), run_negative(points, pt)):
            recs.append({"configuration": f"{label}: {pt.id}", "criterion": row.criterion,
                         "status": row.status,
                         "measured": _fmt(row.value, row.lo, row.hi, row.n,
                                          row.basis == "replay estimate", row.n_families),
                         "why": row.why, "target": row.target, "basis": row.basis,
                         "note": row.note})
    cols = ["configuration", "criterion", "status", "measured", "why", "target", "basis",
            "note"]
    return pd.DataFrame(recs, columns=cols)


def recommended_settings(run: Run) -> dict[str, Any] | None:
    """The recommended point's thresholds as GAIA's ``memory_settings.json`` block."""
    from .verdict import recommend

    best = recommend(run.summary.points)
    return None if best is None else {"skill_synthesis": dict(best.params)}


def _index(df: pd.DataFrame) -> list[str]:
    """The columns that tell points apart: strategy, the protocol settings that vary, the
    thresholds."""
    varying = [c for c in PROTOCOL_DEFAULTS if c in df and df[c].nunique() > 1]
    return ["strategy", *varying, *PARAMS]


def kpi_table(run: Run) -> pd.DataFrame:
    """Every point with its KPIs as ``value [lo, hi] n`` strings."""
    df = run.points
    cols = _index(df)
    out = df[cols].copy()
    for k in _SHOWN:
        if k in df:
            out[k] = [_fmt(df[k][i], df[f"{k}_lo"][i], df[f"{k}_hi"][i], df[f"{k}_n"][i],
                           df[f"{k}_estimate"][i]) for i in df.index]
    return out.set_index(cols).sort_index()


def _width(df: pd.DataFrame, k: str, i: Any) -> float | None:
    lo, hi = df.get(f"{k}_lo"), df.get(f"{k}_hi")
    if lo is None or hi is None or pd.isna(lo[i]) or pd.isna(hi[i]):
        return None
    return round(float(hi[i] - lo[i]), 3)


def protocol_table(run: Run) -> pd.DataFrame:
    """How each point drew its probes and what that bought: probes, passes, clusters the
    last pass left over its cap, distillation answers (uncached + cached), wall time,
    interval widths, score separation under its recall key, and the qualified clusters'
    mean share of members labelled failed. Only the settings that vary are shown."""
    df = run.points
    cols = [c for c in _index(df) if c == "strategy" or df[c].nunique() > 1]
    recs = []
    for i in df.index:
        s = run.point_summary(df["point"][i])
        split, pas = (s.split, s.pass_report or {}) if s else ({}, {})
        shares, calls = pas.get("failed_shares") or [], s.model_calls if s else ModelCalls()
        recs.append({
            **{c: df[c][i] for c in cols},
            "probes": int(df["probes"][i]), "passes": int(df["passes"][i]),
            "left over": split.get("left_for_later_at_end", pas.get(
                "left_for_later", _left_over(pas.get("skipped") or []))),
            "distilled (cached)": f"{calls.synthesis} ({calls.synthesis_cache_hits})",
            "wall s": round(float(df["wall_s"][i])),
            "recall hit": _kpi_cell(df, "recall_hit_rate", i),
            "width": _width(df, "recall_hit_rate", i),
            "steps (est.)": _kpi_cell(df, "step_reduction", i),
            "separation": _kpi_cell(df, "recall_separation", i),
            "right > wrong": _kpi_cell(df, "right_above_wrong", i),
            "failed members": round(float(np.mean(shares)), 2) if shares else None})
    return pd.DataFrame(recs)


def _left_over(skipped: list[Any]) -> int:
    """Clusters a strict pass left over its cap (from its skip reasons: points written
    before passes reported ``left_for_later``)."""
    for _, why in skipped:
        if "qualified cluster(s) over" in str(why):
            return int(str(why).split()[0])
    return 0


def _kpi_cell(df: pd.DataFrame, k: str, i: Any) -> str:
    if k not in df:
        return "n/a"
    return _fmt(df[k][i], df[f"{k}_lo"][i], df[f"{k}_hi"][i], df[f"{k}_n"][i],
                df[f"{k}_estimate"][i])


def peer_table(run: Run) -> pd.DataFrame:
    """Strategies side by side at the parameter settings more than one strategy ran."""
    df = run.points
    shared = df.groupby(list(PARAMS))["strategy"].transform("nunique") > 1
    sub = df[shared] if shared.any() else df
    return kpi_table(replace(run, points=sub.reset_index(drop=True)))


def _pivot_points(df: pd.DataFrame) -> pd.DataFrame:
    """Points at the most common max_recall_body_chars (heatmaps vary tau and occ only)."""
    if df.empty:
        return df
    body = df["max_recall_body_chars"].mode().iloc[0]
    return df[df["max_recall_body_chars"] == body]


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (reports run without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out_dir: str | Path, name: str) -> Path:
    """Lay out, write ``out_dir/name`` as PNG, and free the figure."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return out / name


def plot_heatmaps(run: Run, out_dir: str | Path) -> list[Path]:
    """Step reduction, recall precision and hit rate over tau x min_occurrences (PNG)."""
    plt = _pyplot()

    written = []
    for strategy, df in run.points.groupby("strategy"):
        df = _pivot_points(df)
        if df["similarity_tau"].nunique() < 2 and df["min_occurrences"].nunique() < 2:
            continue
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        for ax, kpi in zip(axes, ("step_reduction", "recall_precision", "recall_hit_rate"),
                           strict=True):
            grid = df.pivot_table(index="min_occurrences", columns="similarity_tau",
                                  values=kpi, aggfunc="mean")
            ns = df.pivot_table(index="min_occurrences", columns="similarity_tau",
                                values=f"{kpi}_n", aggfunc="mean")
            im = ax.imshow(grid.to_numpy(dtype=float), cmap="viridis", aspect="auto",
                           vmin=-0.2 if kpi == "step_reduction" else 0.0, vmax=1.0)
            ax.set_xticks(range(grid.shape[1]), [f"{c:g}" for c in grid.columns])
            ax.set_yticks(range(grid.shape[0]), [str(r) for r in grid.index])
            ax.set_xlabel("similarity_tau")
            ax.set_ylabel("min_occurrences")
            est = " (estimate)" if kpi == "step_reduction" else ""
            ax.set_title(f"{kpi}{est}")
            for (i, j), v in np.ndenumerate(grid.to_numpy(dtype=float)):
                n = ns.to_numpy()[i, j]
                ax.text(j, i, "n/a" if np.isnan(v) else f"{v:.2f}\nn={int(n)}",
                        ha="center", va="center", color="w", fontsize=8)
            fig.colorbar(im, ax=ax, shrink=0.8)
        fig.suptitle(f"{strategy}: KPIs over tau x min_occurrences "
                     f"(max_recall_body_chars={int(df['max_recall_body_chars'].iloc[0])})")
        written.append(_save(fig, out_dir, f"heatmap-{strategy}.png"))
    return written


def plot_body_chars(run: Run, out_dir: str | Path) -> list[Path]:
    """Injected prompt size and step reduction against max_recall_body_chars (PNG)."""
    plt = _pyplot()

    df, rows = run.points, run.rows
    if df.empty or df["max_recall_body_chars"].nunique() < 2 or rows.empty:
        return []
    mem = rows[rows["arm"] == "memory"]
    prompt = mem.groupby("point")["prompt_chars"].mean().rename("prompt_chars_mean")
    df = df.join(prompt, on="point")
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for (strategy, tau, occ), g in df.groupby(["strategy", "similarity_tau", "min_occurrences"]):
        g = g.sort_values("max_recall_body_chars")
        label = f"{strategy} tau={tau:g} occ={occ}"
        a.plot(g["max_recall_body_chars"], g["prompt_chars_mean"], marker="o", label=label)
        b.errorbar(g["max_recall_body_chars"], g["step_reduction"],
                   yerr=[g["step_reduction"] - g["step_reduction_lo"],
                         g["step_reduction_hi"] - g["step_reduction"]],
                   marker="o", capsize=3, label=label)
    a.set_xlabel("max_recall_body_chars")
    a.set_ylabel("mean injected block (chars)")
    a.set_title("prompt size")
    b.set_xlabel("max_recall_body_chars")
    b.set_ylabel("step reduction (replay estimate)")
    b.set_title("step reduction, 95% CI")
    b.legend(fontsize=6)
    return [_save(fig, out_dir, "body-chars.png")]


def _recall_scores(run: Run) -> tuple[np.ndarray, np.ndarray, str]:
    """Probe-goal vs when_to_use best cosines (own family, other family) of one strategy."""
    rows = run.rows
    if rows.empty or "best_right_score" not in rows:
        return np.zeros(0), np.zeros(0), ""
    mem = rows[(rows["arm"] == "memory") & (rows["steps_method"] != "live")]
    strategy = "skillsynth" if (mem["strategy"] == "skillsynth").any() else \
        (mem["strategy"].iloc[0] if len(mem) else "")
    mem = mem[mem["strategy"] == strategy]
    return (mem["best_right_score"].dropna().to_numpy(float),
            mem["best_wrong_score"].dropna().to_numpy(float), str(strategy))


def plot_similarity(run: Run, out_dir: str | Path) -> list[Path]:
    """Where tau should sit (PNG): goal vs goal cosines by family, and probe goal vs the
    synthesized procedures' when_to_use (what recall actually compares), swept taus marked."""
    plt = _pyplot()

    same, diff = run.similarity.get("same", []), run.similarity.get("different", [])
    right, wrong, strategy = _recall_scores(run)
    if not same and not diff and not right.size:
        return []
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4))
    taus = sorted(set(run.points["similarity_tau"])) if not run.points.empty else []
    panels = ((a, diff, same, "different family", "same family",
               f"goal vs goal ({run.similarity.get('embedder')})"),
              (b, wrong, right, "best other-family procedure", "best own-family procedure",
               f"probe goal vs procedure when_to_use ({strategy} points)"))
    for ax, lo_vals, hi_vals, lo_name, hi_name, title in panels:
        vals = list(lo_vals) + list(hi_vals)
        if not vals:
            ax.set_title(f"{title}: no data")
            continue
        bins = [float(x) for x in np.linspace(min(vals + [0.0]), 1.0, 50)]
        ax.hist(lo_vals, bins=bins, alpha=0.6, density=True, label=f"{lo_name} (n={len(lo_vals)})")
        ax.hist(hi_vals, bins=bins, alpha=0.6, density=True, label=f"{hi_name} (n={len(hi_vals)})")
        for tau in taus:
            ax.axvline(tau, color="k", ls="--", lw=0.8)
            ax.text(tau, ax.get_ylim()[1] * 0.95, f"tau={tau:g}", rotation=90, fontsize=7,
                    va="top")
        ax.set_xlabel("cosine")
        ax.set_ylabel("density")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    return [_save(fig, out_dir, "similarity.png")]


def similarity_table(run: Run) -> pd.DataFrame:
    """Per swept tau: the share of goal pairs at or above it (same and different family),
    and of probes whose best own-family / other-family procedure is at or above it."""
    same = np.asarray(run.similarity.get("same", []))
    diff = np.asarray(run.similarity.get("different", []))
    right, wrong, _ = _recall_scores(run)
    taus = sorted(set(run.points["similarity_tau"])) if not run.points.empty else []

    def share(x: np.ndarray, t: float) -> float | None:
        return float((x >= t).mean()) if x.size else None

    return pd.DataFrame([{"tau": t, "goal_pairs_same": share(same, t), "n_same": int(same.size),
                          "goal_pairs_different": share(diff, t), "n_different": int(diff.size),
                          "probe_own_procedure": share(right, t), "n_own": int(right.size),
                          "probe_other_procedure": share(wrong, t), "n_other": int(wrong.size)}
                         for t in taus]).set_index("tau") if taus else pd.DataFrame()


def validity_table(run: Run) -> pd.DataFrame:
    """Per point: validity under both profiles, grounding, provenance, floors."""
    cols = [f"validity_{p}" for p in PROFILES] + ["grounded_tools_rate", "provenance_integrity",
                                                  "floors_behaved"]
    df = run.points
    out = df[["strategy", *PARAMS]].copy()
    for k in cols:
        if k not in df:  # a run from before the KPI existed
            continue
        out[k] = [_fmt(df[k][i], df[f"{k}_lo"][i], df[f"{k}_hi"][i], df[f"{k}_n"][i])
                  for i in df.index]
    if "duplicate_name_count" in df:
        out["duplicate_names"] = df["duplicate_name_count"]
    out["floors_failed"] = df["floors_failed"]
    return out.set_index(["strategy", *PARAMS]).sort_index()


def baseline_table(run: Run, baseline: str | Path) -> pd.DataFrame:
    """The baseline's KPI checks of :func:`gate`, one row per point and KPI.

    Validity and floor checks are in :func:`validity_table`; this is the regression part.
    """
    rows = [c.__dict__ for c in gate_checks(run.summary, baseline)
            if not c.check.startswith(("validity_", "floor ", "point finished",
                                       "points finished", "synthesis pass"))]
    return pd.DataFrame(rows).set_index(["point", "check"]) if rows else pd.DataFrame()


def render_report(run_dir: str | Path, *, baseline: str | Path | None = None,
                  out_html: str | Path | None = None, timeout_s: float | None = 1800) -> Path:
    """Execute the report notebook over a run and write it as HTML (code cells hidden).

    Returns the HTML file (default ``<run_dir>/report.html``); PNGs go to
    ``<run_dir>/plots/`` and the executed notebook to ``<run_dir>/report.ipynb``.
    ``timeout_s`` bounds each cell (papermill's execution timeout; ``None``: no limit), so
    a stuck kernel fails the report with that message instead of hanging it.
    """
    import nbformat
    from nbconvert import HTMLExporter

    from ..sweeps.notebooks import execute_notebook, find_notebook

    run_dir = Path(run_dir).resolve()
    load_run(run_dir)  # fail here, with the message, rather than inside the kernel
    executed = run_dir / "report.ipynb"
    execute_notebook(find_notebook("report.ipynb"), executed,
                     {"run_dir": str(run_dir),
                      "baseline": str(Path(baseline).resolve()) if baseline else "",
                      "plots_dir": str(run_dir / "plots")}, timeout_s=timeout_s)
    exporter = HTMLExporter(exclude_input=True, exclude_output_prompt=True,
                            exclude_input_prompt=True)
    body, _ = exporter.from_notebook_node(nbformat.read(str(executed), as_version=4))
    html = Path(out_html) if out_html else run_dir / "report.html"
    html.write_text(body, encoding="utf-8")
    return html
