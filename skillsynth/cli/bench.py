"""``skillsynth bench``: performance and quality figures (medians with n)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import load_thresholds
from ..errors import CorpusError
from ._common import (
    EXIT_OK,
    HOME_HELP,
    UsageError,
    chat_help_text,
    chat_names_text,
    clients,
    command,
    group,
    model_options,
    num,
    parse_sets,
    print_json,
)

if TYPE_CHECKING:
    from ..figures import Measurement

__all__ = ["register"]

#: Options that say where files live or where output goes, not what is measured: a
#: record's command leaves them out (they are this machine's paths, not the measurement's).
_NOT_MEASURED = {"json", "record", "record_name", "out", "cache", "results", "home"}


def _command_line(args: argparse.Namespace) -> str:
    """The ``skillsynth bench`` command that reproduces ``args`` (defaults left out)."""
    import shlex

    words = ["skillsynth", "bench", args.bench_command]
    for a in args.bench_parser._actions:
        if a.dest in _NOT_MEASURED or isinstance(a, argparse._HelpAction):
            continue
        v = getattr(args, a.dest, None)
        if not a.option_strings:  # a positional argument
            words += [str(x) for x in v] if isinstance(v, list) else [str(v)]
        elif v is None or v == a.default or v is False:
            continue
        elif v is True:
            words.append(a.option_strings[-1])
        elif a.nargs in ("+", "*"):
            words += [a.option_strings[-1], *map(str, v)]
        elif isinstance(v, list):  # a repeatable option
            for x in v:
                words += [a.option_strings[-1], str(x)]
        elif a.dest == "cluster" and v != "local":  # a scheduler's address names a host
            words += [a.option_strings[-1], "ADDRESS"]
        else:
            words += [a.option_strings[-1], str(v)]
    return shlex.join(words)


def _keep(args: argparse.Namespace, build: Callable[[str], Measurement]) -> None:
    """With ``--record DIR``: write the measurement there (``--record-name`` renames it)."""
    if not args.record:
        return
    from dataclasses import replace

    from ..figures import record

    m = build(_command_line(args))
    if args.record_name:
        m = replace(m, name=args.record_name)
    print(f"recorded {record(m, args.record)}", file=sys.stderr)


def _record_options(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument("--record", default=None, metavar="DIR",
                   help="also write the figures as a measurement record DIR/NAME.json, "
                   "replacing one of that name (eval/figures/ feeds the docs' Measured "
                   "figures page); default: not recorded")
    p.add_argument("--record-name", default=None, metavar="NAME",
                   help=f"the record's name (default {name})")
    p.set_defaults(bench_parser=p)


def _bench_models(args: argparse.Namespace) -> int:
    from ..bench import bench_models
    from ..models.serve import locate_models, serve_local

    with serve_local(locate_models(args.home, chat=args.chat)) as servers:
        figures = bench_models(servers, repeats=args.repeats)
    from ..bench.measured import models_measurement
    from ..models.chat_models import DEFAULT_CHAT_MODEL

    _keep(args, lambda cmd: models_measurement(
        figures, cmd, name=f"models-{args.chat or DEFAULT_CHAT_MODEL}"))
    if args.json:
        print_json(figures)
        return EXIT_OK
    c, e, k = figures["chat_tokens_per_s"], figures["embeddings_per_s"], figures["cached_call_ms"]
    print(f"chat generation   {c['median']:8.1f} tokens/s  (median of n={c['n']}, {c['model']}, "
          f"{c['max_tokens']} max tokens)")
    pp = figures["prompt_tokens_per_s"]
    print(f"prompt processing {pp['median']:8.1f} tokens/s  (median of n={pp['n']}, about 600 "
          "prompt tokens)")
    print(f"embeddings        {e['median']:8.1f} texts/s   (median of n={e['n']} batches of "
          f"{e['batch']} short goals, {e['model']})")
    print(f"cached chat call  {k['median']:8.3f} ms        (median of n={k['n']})")
    return EXIT_OK


def _bench_worlds(args: argparse.Namespace) -> int:
    from ..bench import bench_worlds
    from ..evaluation.live.worlds import WORLDS

    worlds = args.world or list(WORLDS)
    if args.live_tasks:
        from ._common import thresholds_of

        with clients(args) as (chat, _):
            figures = bench_worlds(worlds, llm=chat, live_tasks=args.live_tasks,
                                   step_limit=args.step_limit, config=thresholds_of(args),
                                   policy=not args.no_policy, max_tasks=args.max_tasks)
    else:
        figures = bench_worlds(worlds, max_tasks=args.max_tasks)
    from ..bench.measured import worlds_measurement

    _keep(args, lambda cmd: worlds_measurement(figures, cmd))
    if args.json:
        print_json(figures)
        return EXIT_OK
    for name, f in figures.items():
        c = f["call_ms"]
        print(f"{name:<13} tool call {c['median']:.3f} ms median, {c['p99']:.3f} ms p99 "
              f"(n={c['n']} calls); fresh episode {f['fresh_episode_ms']['median']:.1f} ms "
              f"(n={f['fresh_episode_ms']['n']}); scoring {f['score_ms']['median']:.1f} ms "
              f"(n={f['score_ms']['n']})")
        for arm, r in f.get("live_run_s", {}).items():
            print(f"{'':<13} live run, {arm:<9} {r['median']:.1f} s median (n={r['n']} runs, "
                  f"step limit {args.step_limit})")
    return EXIT_OK


def _bench_live(args: argparse.Namespace) -> int:
    from ..bench.live import bench_live, parse_setting
    from ..bench.measured import live_measurement

    try:
        settings = [parse_setting(x) for x in args.setting or ["none", "none/grouped",
                                                               "ngram/grouped",
                                                               "draft/grouped"]]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    figures = bench_live(settings, world=args.world, tasks=args.tasks, chat=args.chat,
                         step_limit=args.step_limit,
                         log=lambda line: print(line, file=sys.stderr))
    _keep(args, lambda cmd: live_measurement(figures, cmd))
    if args.json:
        print_json(figures)
        return EXIT_OK
    for label, f in figures["settings"].items():
        same, cache = f["transcripts_identical_to_first"], f["prompt_tokens_from_cache"]
        draft = f["draft_accepted"]
        arms = ", ".join(f"{k.split(', ')[1]} {v['median']:.1f}" for k, v in f.items()
                         if k.startswith("seconds_per_run, ") and v["n"])
        print(f"{label:<28} {f['seconds_per_run']['median']:6.1f} s/run median (n="
              f"{f['seconds_per_run']['n']}; {arms}), {f['runs_per_hour']['value']:6.1f} runs/h; "
              f"gen {num(f['generated_tokens_per_s']['value'])} tok/s, prompt "
              f"{num(f['prompt_tokens_per_s']['value'])} tok/s, cached prompt "
              f"{num(cache['value'])}, prompt share of model time "
              f"{num(f['prompt_share_of_model_time']['value'])}; draft accepted {num(draft['value'])} (n={draft['n']}); "
              f"identical {num(same['value'])} (n={same['n']}); peak "
              f"{f['chat_server_peak_mib']['value']} MiB")
    return EXIT_OK


_SHIPPED = {"synthetic-8": ("synthetic", None, None),
            "taubench-airline": ("taubench", "datasets/taubench-airline-gpt4o/*.json.gz", None),
            "tau2-airline": ("tau2", "datasets/tau2-airline/*1trials.json.gz",
                             "datasets/tau2-airline/tasks_airline_HEAD.json.gz"),
            "tau2-retail": ("tau2", "datasets/tau2-retail/*1trials.json.gz",
                            "datasets/tau2-retail/tasks_retail_HEAD.json.gz")}


def _shipped_corpora(folder: Path) -> dict[str, str]:
    """Build the shipped corpora (from a checkout's datasets/) into ``folder``."""
    from glob import glob

    from ..corpora.importing import import_corpus
    from ..corpora.synthetic import generate_corpus

    out = {}
    for name, (fmt, pattern, tasks) in _SHIPPED.items():
        db = folder / f"{name}.db"
        if fmt == "synthetic":
            generate_corpus(db, families=8, seed=0, attempts=5)
        else:
            files = sorted(glob(pattern or ""))
            if not files:
                raise CorpusError(f"shipped corpus {name}: no files match {pattern} (run "
                                      "from a skillsynth checkout, or pass --corpus)")
            import_corpus(fmt, files, db, tasks=tasks)  # type: ignore[arg-type]
        out[name] = str(db)
    return out


def _bench_distill(args: argparse.Namespace) -> int:
    import tempfile

    from ..bench import bench_distill
    from ..models.cache import CallCache
    from ..models.chat import ChatClient
    from ..models.chat_models import DEFAULT_CHAT_MODEL
    from ..models.embed import Embedder
    from ..models.serve import EMBED_MODEL_ID, default_cache_path, locate_models, serve_local

    th = load_thresholds(args.config, overrides=parse_sets(args.set), embedder=EMBED_MODEL_ID,
                         calibrated=True)  # the bench's figures are at the calibration
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        corpora = (dict(c.split("=", 1) for c in args.corpus) if args.corpus
                   else _shipped_corpora(Path(tmp)))
        cache = None if args.no_cache else CallCache(Path(args.cache or default_cache_path()))
        try:
            for name in args.chat or [DEFAULT_CHAT_MODEL]:
                with serve_local(locate_models(chat=name)) as servers:
                    assert servers.chat is not None and servers.embed is not None
                    with ChatClient(servers.chat, cache=cache) as chat, \
                            Embedder(servers.embed, cache=cache) as emb:
                        results.append(bench_distill(
                            corpora, chat, emb, th, k=args.k, max_clusters=args.max_clusters,
                            log=lambda line: print(line, file=sys.stderr, flush=True)))
        finally:
            if cache is not None:
                cache.close()
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    from ..bench.measured import distill_measurement

    _keep(args, lambda cmd: distill_measurement(results, cmd))
    if args.json:
        print_json(results)
        return EXIT_OK

    def v(x: dict[str, Any]) -> str:
        return "  -  " if x["value"] is None else f"{x['value']:.2f}"

    print(f"similarity_tau {th.similarity_tau}; json mode; at most {args.max_clusters} "
          "clusters per corpus; shares with their n")
    print(f"{'model':<36} {'corpus':<17} {'n':>3} {'parse':>6} {'kebab':>6} {'unique':>6} "
          f"{'ground':>6} {'home':>6} {'own':>6} {'other':>6} {'s/dist':>7} {'tok':>5}")
    for r in results:
        for cname, c in r["corpora"].items():
            sec, tok = c["seconds_per_distillation"], c["completion_tokens"]
            print(f"{r['model']:<36} {cname:<17} {c['answers']:>3} {v(c['parse_rate']):>6} "
                  f"{v(c['kebab_names']):>6} {v(c['unique_names']):>6} {v(c['grounded']):>6} "
                  f"{v(c['points_home']):>6} {num(c['own_cosine_mean']):>6} "
                  f"{num(c['best_other_cosine_mean']):>6} "
                  f"{num(sec['median']):>7} {num(tok['median']):>5}")
    return EXIT_OK


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


def _bench_pipeline(args: argparse.Namespace) -> int:
    from ..bench import bench_pipeline

    figures = bench_pipeline(tuple(args.sizes), tuple(args.procedures), repeats=args.repeats,
                             seed=args.seed, recall_queries=args.queries,
                             check_up_to=args.check_up_to)
    from ..bench.measured import pipeline_measurement

    _keep(args, lambda cmd: pipeline_measurement(figures, cmd))
    if args.json:
        print_json(figures)
        return EXIT_OK
    print(f"detect and cluster: synthetic stores, {figures['dim']}-d pre-made vectors "
          f"({figures['families']} families), tau {figures['tau']}, embedding excluded")
    print(f"  seconds are medians of n={figures['repeats']} runs; peak = the process's peak "
          "resident memory during the step")
    for row in figures["detect_cluster"]:
        head = f"  {row['sessions']:>9,} sessions"
        for step in ("detect", "agglomerative", "gaia-greedy", "hdbscan"):
            f = row.get(step)
            if f is None:
                continue
            if "skipped" in f:
                print(f"{head}  {step:<13} {f['skipped']}")
            else:
                since = " (since start)" if f["peak_since_start"] else ""
                line = (f"{head}  {step:<13} {f['median_s']:8.2f} s (n={f['n']})  peak "
                        f"{_gib(f['peak_bytes'])}{since}")
                if "clusters" in f:
                    line += f"  {f['clusters']} clusters"
                c = f.get("check")
                if c:
                    same = "same partition as" if c["identical"] else "DIFFERS from"
                    ari = f", ARI {c['ari']:.4f}" if "ari" in c else ""
                    line += (f"  {same} the all-pairs method{ari} (that one "
                             f"{c['straightforward_s']:.1f} s)")
                print(line)
            head = " " * len(head)
    print(f"recall latency: one query at a time, top_k {figures['top_k']}, tau "
          f"{figures['tau']}, queries from the stored procedures' families")
    for r in figures["recall"]:
        cells = r["cells"]
        how = (f"cells ({cells['scanned_mean']:.1f} of {cells['nlist']} scanned per query)"
               if cells else "flat scan")
        since = " (since start)" if r["peak_since_start"] else ""
        print(f"  {r['procedures']:>9,} procedures: median {r['median_ms']:.3f} ms, p99 "
              f"{r['p99_ms']:.3f} ms (n={r['n']} queries); {how}; build "
              f"{r['build_s']:.2f} s; peak {_gib(r['peak_bytes'])}{since}; "
              f"recall@{figures['top_k']} vs flat {r['recall_at_k_vs_flat']:.4f}")
    return EXIT_OK


def _bench_tuning(args: argparse.Namespace) -> int:
    from ..bench import bench_tuning

    with clients(args) as (chat, emb):
        f = bench_tuning(emb, chat, sessions=args.sessions, repeats=args.repeats)
    from ..bench.measured import tuning_measurement

    _keep(args, lambda cmd: tuning_measurement(f, cmd))
    if args.json:
        print_json(f)
        return EXIT_OK
    print(f"tuning view on a synthetic corpus of {f['corpus_sessions']} sessions: "
          f"{f['sessions']} history sessions clustered, {f['probes']} probes, "
          f"{f['procedures_in_view']} distilled procedures in view "
          f"({f['distilled_now']} distilled now)")
    print(f"  prepare (detect, embed, pair sample; embedder cache) {f['prepare_s']:.2f} s, once")
    k, m = f["update_keep_tau_s"], f["update_move_tau_s"]
    print(f"  update, tau kept (re-judge, cached distillations, recall) "
          f"{k['median']:.3f} s median of n={k['n']}")
    print(f"  update, tau moved (cluster again)                       "
          f"{m['median']:.3f} s median of n={m['n']}")
    return EXIT_OK

def _bench_sweep(args: argparse.Namespace) -> int:
    from ..evaluation.sweeps.overhead import bench_sweep
    from ..models.serve import default_cache_path

    figures = bench_sweep(args.spec, cache=args.cache or str(default_cache_path()),
                          repeats=args.repeats, workers=args.workers, cluster=args.cluster,
                          results_root=args.results, transport=args.transport,
                          log=lambda line: print(line, file=sys.stderr, flush=True))
    from ..bench.measured import sweep_measurement

    _keep(args, lambda cmd: sweep_measurement(figures, cmd))
    if args.json:
        print_json(figures)
        return EXIT_OK
    where = f"Dask {figures['cluster']}" if figures["cluster"] else "thread pool"
    if figures.get("transport"):
        where += f", {figures['transport']} transport"
    print(f"warm point stages, {figures['spec']} ({where}; medians over every timed point):")
    for name, f in figures["stages"].items():
        print(f"  {name:<13} {f['median']:8.3f} s  (n={f['n']})")
    one, full = figures["single_point_s"], figures["sweep_s"]
    print(f"single warm point {one['median']:8.2f} s  (notebook, n={one['n']}; its sweep "
          f"{figures['single_sweep_s']['median']:.2f} s)")
    print(f"warm sweep        {full['median']:8.2f} s  (n={full['n']}; {figures['points']} "
          f"points, {figures['workers']} workers; target < {figures['bound_s']:.1f} s = 2 x "
          f"single x points / workers; ratio {figures['ratio']:.2f} of 2)")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add this group's commands to the ``skillsynth`` parser."""
    home_help = HOME_HELP
    chat_names = chat_names_text()
    chat_help = chat_help_text()
    bes = group(sub, "bench", "print performance figures", description="Print performance figures (medians with n).", metavar="TARGET")
    p = command(bes, "pipeline", "detect/cluster time per method and recall latency on "
                "synthetic stores (medians, p99, peak memory)", _bench_pipeline)
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000],
                   help="sessions per synthetic store (each size in its own process; "
                   "1000000 needs about 8 GiB)")
    p.add_argument("--procedures", type=int, nargs="+", default=[1_000, 10_000, 100_000],
                   help="procedure counts for recall latency")
    p.add_argument("--repeats", type=int, default=3,
                   help="runs per timing (the median is printed with n)")
    p.add_argument("--queries", type=int, default=1_000,
                   help="recall queries per run (p99 over all runs' queries)")
    p.add_argument("--check-up-to", type=int, default=20_000, metavar="N",
                   help="compare partitions with the all-pairs methods up to N sessions")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    _record_options(p, "pipeline")
    p = command(bes, "models", "tokens/s, embeddings/s and cached-call latency of the "
                "embedded models", _bench_models)
    p.add_argument("--home", default=None, help=home_help)
    p.add_argument("--repeats", type=int, default=5, help="runs per figure (median reported)")
    p.add_argument("--chat", default=None, metavar="NAME", help=chat_help)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    _record_options(p, "models-CHAT")
    p = command(bes, "distill", "distillation quality per embedded chat model on labelled "
                "corpora (parse, names, grounding, trigger, seconds)", _bench_distill)
    p.add_argument("--chat", action="append", default=[], metavar="NAME",
                   help=f"chat model to measure (repeatable; {chat_names})")
    p.add_argument("--corpus", action="append", default=[], metavar="NAME=DB",
                   help="a labelled corpus (repeatable; default: the shipped corpora, built "
                   "from the checkout's datasets/)")
    p.add_argument("--k", type=int, default=3, help="attempts per task in the history")
    p.add_argument("--max-clusters", type=int, default=8,
                   help="most qualified clusters distilled per corpus")
    p.add_argument("--cache", default=None, help="call cache (default <models home>/cache.db)")
    p.add_argument("--no-cache", action="store_true", help="no call cache")
    p.add_argument("--config", default=None, help="memory_settings.json or YAML thresholds")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one threshold (repeatable)")
    p.add_argument("--out", default=None, help="write the JSON figures here")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    _record_options(p, "distill")
    p = command(bes, "worlds", "tool-call overhead per world (median, p99) and seconds per "
                "live run per arm", _bench_worlds)
    p.add_argument("--world", action="append", default=[], metavar="NAME",
                   help="a world (repeatable; default every tau2 world)")
    p.add_argument("--live-tasks", type=int, default=0,
                   help="also time live runs on the first N tasks, both arms (needs a model)")
    p.add_argument("--step-limit", type=int, default=8, help="most tool calls per live run")
    p.add_argument("--no-policy", action="store_true", help="live runs without the policy")
    p.add_argument("--max-tasks", type=int, default=None,
                   help="time the calls of at most N tasks per world (default all)")
    model_options(p)
    _record_options(p, "worlds")
    p = command(bes, "sweep", "warm sweep overhead: a warm point's time per stage and a warm "
                "sweep against single point x points / workers", _bench_sweep)
    p.add_argument("spec", help="a sweep spec, e.g. eval/sweeps/synthetic-3x3x3.yaml")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed runs of the single point and of the sweep (medians)")
    p.add_argument("--workers", type=int, default=None,
                   help="points at once (default: the spec's workers)")
    p.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="a Dask scheduler address or 'local' (as for `skillsynth sweep`)")
    p.add_argument("--transport", choices=("auto", "shared", "shipped"), default="auto",
                   help="with a scheduler address: as for `skillsynth sweep`")
    p.add_argument("--cache", default=None,
                   help="call cache (default <models home>/cache.db); an untimed run warms it")
    p.add_argument("--results", default=None,
                   help="keep the runs here (default: a temporary folder, removed)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    _record_options(p, "sweep-SPEC, or sweep-SPEC-dask-TRANSPORT with --cluster")
    p = command(bes, "live", "live runs per hour by decoding (plain, n-gram, draft model), "
                "run order and recall layout, with greedy transcript identity", _bench_live)
    p.add_argument("--setting", action="append", default=[],
                   metavar="DECODING[/ORDER[/LAYOUT]]",
                   help="a setting to measure (repeatable; decoding none, ngram or draft, "
                   "order interleaved or grouped, layout main or release: where the recalled "
                   "block goes, release needing amd-gaia; default none, none/grouped, "
                   "ngram/grouped, draft/grouped); the first runs again last as the noise floor")
    p.add_argument("--world", default="tau2:retail", help="the tau2 world (default tau2:retail)")
    p.add_argument("--tasks", nargs="+", default=["36", "70", "71"], metavar="ID",
                   help="the tasks, each run in the no-memory and oracle-args arms")
    p.add_argument("--chat", default="qwen2.5-coder-1.5b", metavar="NAME",
                   help=f"the embedded chat model (default qwen2.5-coder-1.5b; {chat_names})")
    p.add_argument("--step-limit", type=int, default=8, help="most tool calls per live run")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    _record_options(p, "live")
    p = command(bes, "tuning", "seconds per tuning-view update on a synthetic corpus",
                _bench_tuning)
    p.add_argument("--sessions", type=int, default=10_000, help="corpus size")
    p.add_argument("--repeats", type=int, default=5, help="updates per figure (median)")
    model_options(p)
    _record_options(p, "tuning")
