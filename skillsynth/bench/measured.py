"""The benchmarks' figures as :class:`~skillsynth.figures.Measurement` records.

Each bench returns a nested dict shaped for its own printout; these functions pick the
figures a reader compares across measurements (every one a median or value with its n) and
leave the rest (per-row details, raw runs) to the bench's ``--json``.
"""

from __future__ import annotations

from typing import Any

from ..figures import Measurement, measure
from .distill import overall_figures

__all__ = ["distill_measurement", "live_measurement", "models_measurement",
           "pipeline_measurement", "sweep_measurement", "tuning_measurement",
           "worlds_measurement"]


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


def _count(share: dict[str, Any]) -> dict[str, Any]:
    """A share ``{value, n}`` as its count of n (exact, where the ratio is rounded)."""
    v, n = share["value"], share["n"]
    return {"value": None if v is None else round(v * n), "n": n, "unit": "of n"}


def pipeline_measurement(raw: dict[str, Any], command: str, *, name: str = "pipeline"
                         ) -> Measurement:
    """Detect and cluster seconds per method and size; recall latency per index size."""
    figs: dict[str, dict[str, Any]] = {}
    for row in raw["detect_cluster"]:
        for step in ("detect", "agglomerative", "gaia-greedy", "hdbscan"):
            f = row.get(step)
            if f is None or "skipped" in f:
                continue
            fig: dict[str, Any] = {"median": round(f["median_s"], 3), "n": f["n"], "unit": "s",
                                   "peak": _gib(f["peak_bytes"])
                                   + (" (since start)" if f["peak_since_start"] else "")}
            if "clusters" in f:
                fig["clusters"] = f["clusters"]
            if f.get("check"):
                fig["same partition as all-pairs"] = f["check"]["identical"]
            figs[f"{step}, {row['sessions']:,} sessions"] = fig
    for r in raw["recall"]:
        cells = r["cells"]
        figs[f"recall, {r['procedures']:,} procedures"] = {
            "median": round(r["median_ms"], 3), "n": r["n"], "unit": "ms",
            "p99": round(r["p99_ms"], 3),
            "index": (f"cells ({cells['scanned_mean']:.1f} of {cells['nlist']} scanned)"
                      if cells else "flat scan"),
            f"recall@{raw['top_k']} vs flat": round(r["recall_at_k_vs_flat"], 4)}
    sizes = ", ".join(f"{row['sessions']:,}" for row in raw["detect_cluster"])
    counts = ", ".join(f"{r['procedures']:,}" for r in raw["recall"])
    title = f"The pipeline's hot paths: {sizes} sessions; {counts} procedures"
    return measure(name, title, command, figs,
                   note=f"Synthetic stores, {raw['dim']}-d pre-made vectors in "
                   f"{raw['families']} families, tau {raw['tau']}, top_k {raw['top_k']}; "
                   "each size in its own process; peak = that process's peak resident "
                   "memory during the step; embedding excluded.")


def models_measurement(raw: dict[str, Any], command: str, *, name: str) -> Measurement:
    """Generated and prompt tokens/s, embeddings/s and a cached call's latency."""
    c, p = raw["chat_tokens_per_s"], raw["prompt_tokens_per_s"]
    e, k = raw["embeddings_per_s"], raw["cached_call_ms"]
    figs = {"generated tokens/s": {"median": round(c["median"], 1), "n": c["n"],
                                   "unit": "tokens/s", "max tokens": c["max_tokens"]},
            "prompt tokens/s": {"median": round(p["median"], 1), "n": p["n"],
                                "unit": "tokens/s", "prompt": "about 600 tokens"},
            "embeddings/s": {"median": round(e["median"], 1), "n": e["n"], "unit": "texts/s",
                             "batch": e["batch"], "model": e["model"]},
            "cached chat call": {"median": round(k["median"], 3), "n": k["n"], "unit": "ms"}}
    return measure(name, f"The embedded models: {c['model']}", command, figs)


def distill_measurement(results: list[dict[str, Any]], command: str, *,
                        name: str = "distill") -> Measurement:
    """Distillation quality per chat model, counted over all its corpora."""
    figs: dict[str, dict[str, Any]] = {}
    for r in results:
        o, model = overall_figures(r), r["model"]
        rows = [row for c in r["corpora"].values() for row in c["rows"]]
        for label, key in (("parsed", "parse_rate"), ("grounded", "grounded"),
                           ("unique names", "unique_names"), ("points home", "points_home")):
            figs[f"{label}, {model}"] = _count(o[key])
        for label, key, mean in (("own cosine", "own_cosine", o["own_cosine_mean"]),
                                 ("best other cosine", "best_other_cosine",
                                  o["best_other_cosine_mean"])):
            figs[f"{label}, {model}"] = {
                "value": None if mean is None else round(mean, 2), "unit": "mean",
                "n": sum(row.get(key) is not None for row in rows)}
        figs[f"s per distillation, {model}"] = {**o["seconds_per_distillation"], "unit": "s"}
    first = results[0] if results else {}
    corpora = ", ".join(first.get("corpora", {}))
    return measure(name, "Distillation quality per chat model", command, figs,
                   note=f"similarity_tau {first.get('similarity_tau')}, "
                   f"{first.get('mode')} mode, at most {first.get('max_clusters')} "
                   f"qualified clusters per corpus; counts over the corpora {corpora}. "
                   "Points home: the skill's when_to_use is closer, by mean cosine, to its own "
                   "cluster's goals than to any other cluster's.")


def worlds_measurement(raw: dict[str, Any], command: str, *, name: str = "worlds"
                       ) -> Measurement:
    """Tool-call, fresh-episode and scoring latency per world; live runs per arm."""
    figs: dict[str, dict[str, Any]] = {}
    for world, f in raw.items():
        c = f["call_ms"]
        figs[f"tool call, {world}"] = {"median": c["median"], "n": c["n"], "unit": "ms",
                                       "p99": c["p99"]}
        figs[f"fresh episode, {world}"] = {**f["fresh_episode_ms"], "unit": "ms"}
        figs[f"scoring, {world}"] = {**f["score_ms"], "unit": "ms"}
        for arm, r in f.get("live_run_s", {}).items():
            figs[f"live run, {arm}, {world}"] = {"median": r["median"], "n": r["n"],
                                                 "unit": "s"}
    return measure(name, "Tool worlds: call overhead and live runs", command, figs)


def tuning_measurement(raw: dict[str, Any], command: str, *, name: str = "tuning"
                       ) -> Measurement:
    """Seconds per tuning-view update, and the one-off preparation."""
    figs = {"update, tau kept": {**raw["update_keep_tau_s"], "unit": "s"},
            "update, tau moved": {**raw["update_move_tau_s"], "unit": "s"},
            "preparation": {"value": raw["prepare_s"], "n": 1, "unit": "s"}}
    return measure(name, "The tuning view's updates", command, figs,
                   note=f"A synthetic corpus of {raw['corpus_sessions']:,} sessions: "
                   f"{raw['sessions']:,} history sessions clustered, {raw['probes']} probes, "
                   f"{raw['procedures_in_view']} distilled procedures in view.")


def sweep_measurement(raw: dict[str, Any], command: str, *, name: str | None = None
                      ) -> Measurement:
    """A warm point's seconds per stage; a warm sweep against its target."""
    where = "thread pool"
    if raw["cluster"]:
        where = f"Dask, {raw.get('transport') or 'auto'} transport"
    if name is None:  # a fresh local cluster, or an existing scheduler per transport
        name = f"sweep-{raw['spec']}" + (
            "" if not raw["cluster"] else "-dask-local" if raw["cluster"] == "local"
            else f"-dask-{raw.get('transport') or 'auto'}")
    figs: dict[str, dict[str, Any]] = {
        f"stage {stage}": {**f, "unit": "s"} for stage, f in raw["stages"].items()}
    sweep_n = raw["sweep_s"]["n"]
    figs |= {"single warm point": {**raw["single_point_s"], "unit": "s"},
             "its sweep": {**raw["single_sweep_s"], "unit": "s"},
             "warm sweep": {**raw["sweep_s"], "unit": "s"},
             "target (2 x single x points / workers)": {"value": raw["bound_s"],
                                                        "n": sweep_n, "unit": "s"},
             "ratio to single x points / workers": {"value": raw["ratio"], "n": sweep_n,
                                                    "unit": "target < 2"}}
    return measure(name, f"Sweep overhead: {raw['spec']} ({where})", command, figs,
                   note=f"{raw['points']} points on {raw['workers']} workers, every model "
                   "answer cached; stage medians over every timed point.")


def live_measurement(raw: dict[str, Any], command: str, *, name: str = "live") -> Measurement:
    """``bench live``: each setting's figures, named ``<setting>: <figure>``."""
    figures = {f"{label}: {k}": v for label, figs in raw["settings"].items()
               for k, v in figs.items()}
    return measure(name, "Live runs per hour by decoding, run order and recall layout", command,
                   figures,
                   note="Greedy live runs (tau2 tasks x no memory and oracle-args), no call "
                        "cache, a fresh chat server per setting; the first setting again "
                        "last is the noise floor of transcript identity.")
