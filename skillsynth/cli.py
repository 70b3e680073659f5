"""The ``skillsynth`` command line: a thin layer over the Python API.

Each subcommand turns its options into keyword arguments and calls one public function;
the logic lives in the library so notebooks and tests use the same code. Exit codes:
0 success, 1 a failure the command reports (an invalid skill, a broken database),
2 a usage error (bad options, a path that does not exist).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .config import Thresholds, load_thresholds
from .errors import SkillsynthError
from .skill import PROFILES, Skill, validate_dir
from .store import MemoryStore

__all__ = ["build_parser", "main"]

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class _UsageError(Exception):
    """A command-line mistake: reported with exit status 2."""


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


# ---------------------------------------------------------------------- db
def _db_init(args: argparse.Namespace) -> int:
    with MemoryStore.init(args.path) as store:
        version = store.schema_version()
    print(f"created {args.path} (GAIA memory schema v{version})")
    return EXIT_OK


def _db_migrate(args: argparse.Namespace) -> int:
    if not Path(args.path).exists():
        raise _UsageError(f"{args.path}: no such file")
    report = MemoryStore.migrate_file(args.path, dry_run=args.dry_run)
    if not report.steps:
        print(f"{args.path}: already at schema v{report.from_version}; nothing to do")
        return EXIT_OK
    verb = "would migrate" if report.dry_run else "migrated"
    print(f"{args.path}: {verb} v{report.from_version} -> v{report.to_version}")
    for step in report.steps:
        print(f"  {step}")
    return EXIT_OK


def _db_info(args: argparse.Namespace) -> int:
    if not Path(args.path).exists():
        raise _UsageError(f"{args.path}: no such file")
    with MemoryStore.open(args.path, read_only=True) as store:
        info = store.info()
    if args.json:
        _print_json(info)
        return EXIT_OK
    print(f"path:            {info['path']}")
    print(f"schema version:  {info['schema_version']}")
    print(f"embedder id:     {info['embedder_id'] or '-'}")
    print(f"sessions:        {info['tool_history_sessions']} (with tool calls)")
    print("rows:")
    for table, n in info["rows"].items():
        print(f"  {table:<16} {'(absent)' if n is None else n}")
    return EXIT_OK


# ---------------------------------------------------------------------- skill
def _skill_validate(args: argparse.Namespace) -> int:
    skill_dir = Path(args.dir)
    if not skill_dir.is_dir():
        raise _UsageError(f"{skill_dir}: not a directory (pass the folder that holds SKILL.md)")
    errors = validate_dir(skill_dir, args.profile)
    if errors:
        for e in errors:
            print(e)
        return EXIT_FAIL
    print(f"{skill_dir}: valid under {args.profile}")
    return EXIT_OK


def _skill_render(args: argparse.Namespace) -> int:
    src = Path(args.file)
    if not src.is_file():
        raise _UsageError(f"{src}: no such file")
    try:
        skill = Skill.parse(src.read_text(encoding="utf-8"))
    except SkillsynthError as exc:
        raise SkillsynthError(f"{src}: {exc}") from exc
    out = skill.write(args.out, args.profile, overwrite=args.overwrite)
    errors = validate_dir(out, args.profile)
    if errors:  # a Skill always renders valid; this guards the guarantee loudly
        for e in errors:
            print(e, file=sys.stderr)
        return EXIT_FAIL
    print(f"wrote {out / 'SKILL.md'} ({args.profile}, valid)")
    return EXIT_OK


# ---------------------------------------------------------------------- config
def _parse_sets(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise _UsageError(f"--set {pair!r}: expected KEY=VALUE")
        out[key.strip()] = _yaml_scalar(raw)
    return out


def _yaml_scalar(raw: str) -> Any:
    """Read one command-line value as YAML would (``0.9`` -> float, ``true`` -> bool)."""
    import yaml

    return yaml.safe_load(raw) if raw.strip() else raw


def _config_show(args: argparse.Namespace) -> int:
    th = load_thresholds(args.settings, overrides=_parse_sets(args.set), embedder=args.embedder)
    if args.json:
        _print_json(th.to_settings_block())
        return EXIT_OK
    docs = Thresholds.describe()
    for key, value in th.to_settings_block().items():
        print(f"{key:<24} {value!s:<8} {docs[key]['doc']}")
    return EXIT_OK


# ---------------------------------------------------------------------- demo
def _demo(args: argparse.Namespace) -> int:
    from .demo import demo

    report = demo(args.out, overwrite=args.overwrite)
    print(f"memory.db: {report.db_path} (schema v{report.info['schema_version']}, "
          f"rows {report.info['rows']})")
    print(f"procedure: {report.procedure_id}")
    for (written, checked), errors in report.validity.items():
        verdict = "valid" if not errors else "INVALID: " + "; ".join(errors)
        print(f"{written:>11} file under {checked:<11} validator: {verdict}")
    for profile, d in report.skill_dirs.items():
        print(f"wrote {d / 'SKILL.md'} ({profile}); re-read to the same skill")
    return EXIT_OK


# ---------------------------------------------------------------------- models
def _models_prepare(args: argparse.Namespace) -> int:
    from .serve import prepare_models

    prepare_models(args.home, chat=args.chat or None)
    return EXIT_OK


def _models_serve(args: argparse.Namespace) -> int:
    import signal
    import time

    from .serve import locate_models, serve_local

    # SIGTERM ends the process through the finally blocks, so servers are stopped.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with serve_local(locate_models(args.home, chat=args.chat), chat=not args.no_chat,
                     embed=not args.no_embed, threads=args.threads) as servers:
        for role, d in servers.describe().items():
            print(f"{role:<6} {d['base_url']}  model {d['model']}  (pid {d['pid']}, "
                  f"log {d['log']})", flush=True)
        print("serving; Ctrl-C stops both servers", flush=True)
        try:
            while all(s.process.poll() is None for s in servers.servers):
                time.sleep(0.5)
        except KeyboardInterrupt:
            print("stopping", flush=True)
            return EXIT_OK
    print("skillsynth: error: a server exited; see its log", file=sys.stderr)
    return EXIT_FAIL


def _models_status(args: argparse.Namespace) -> int:
    from .llm import Endpoint
    from .serve import models_status

    status = models_status(lemonade=Endpoint.lemonade(base_url=args.lemonade_url),
                           home=args.home, start_local=not args.no_start, chat=args.chat)
    if args.json:
        _print_json(status)
        return EXIT_OK
    lem = status["lemonade"]
    if lem["reachable"]:
        served = "served" if lem["model_served"] else "NOT served"
        print(f"lemonade  reachable at {lem['base_url']}; {lem['model']} {served}; "
              f"models: {', '.join(lem['models']) or '-'}")
    else:
        print(f"lemonade  unreachable at {lem['base_url']}")
    loc = status["local"]
    if loc["prepared"]:
        print(f"local     prepared: chat {loc['chat_id']} ({loc['chat_model']}), "
              f"embed {loc['embed_id']} ({loc['embed_model']}), server {loc['llama_server']}")
        servers = loc.get("servers", {})
        if "error" in servers:
            print(f"local     servers did not start: {servers['error']}")
        for role, probe in servers.items() if "error" not in servers else ():
            state = (f"reachable, serves {', '.join(probe['models'])}" if probe["reachable"]
                     else f"unreachable: {probe['error']}")
            print(f"local     {role:<5} {state}")
    else:
        print(f"local     not prepared: {loc['error']}")
    return EXIT_OK


def _bench_models(args: argparse.Namespace) -> int:
    from .bench import bench_models
    from .serve import locate_models, serve_local

    with serve_local(locate_models(args.home, chat=args.chat)) as servers:
        figures = bench_models(servers, repeats=args.repeats)
    if args.json:
        _print_json(figures)
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


_SHIPPED = {"synthetic-8": ("synthetic", None, None),
            "taubench-airline": ("taubench", "datasets/taubench-airline-gpt4o/*.json.gz", None),
            "tau2-airline": ("tau2", "datasets/tau2-airline/*1trials.json.gz",
                             "datasets/tau2-airline/tasks_airline_HEAD.json.gz"),
            "tau2-retail": ("tau2", "datasets/tau2-retail/*1trials.json.gz",
                            "datasets/tau2-retail/tasks_retail_HEAD.json.gz")}


def _shipped_corpora(folder: Path) -> dict[str, str]:
    """Build the shipped corpora (from a checkout's datasets/) into ``folder``."""
    from glob import glob

    from .corpora.importing import import_corpus
    from .corpora.synthetic import generate_corpus

    out = {}
    for name, (fmt, pattern, tasks) in _SHIPPED.items():
        db = folder / f"{name}.db"
        if fmt == "synthetic":
            generate_corpus(db, families=8, seed=0, attempts=5)
        else:
            files = sorted(glob(pattern or ""))
            if not files:
                raise SkillsynthError(f"shipped corpus {name}: no files match {pattern} (run "
                                      "from a skillsynth checkout, or pass --corpus)")
            import_corpus(fmt, files, db, tasks=tasks)  # type: ignore[arg-type]
        out[name] = str(db)
    return out


def _bench_distill(args: argparse.Namespace) -> int:
    import tempfile

    from .bench import bench_distill
    from .cache import CallCache
    from .chat_models import DEFAULT_CHAT_MODEL
    from .embed import Embedder
    from .llm import ChatClient
    from .serve import EMBED_MODEL_ID, locate_models, models_home, serve_local

    th = load_thresholds(args.config, overrides=_parse_sets(args.set), embedder=EMBED_MODEL_ID)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        corpora = (dict(c.split("=", 1) for c in args.corpus) if args.corpus
                   else _shipped_corpora(Path(tmp)))
        cache = None if args.no_cache else CallCache(Path(args.cache or models_home()
                                                          / "cache.db"))
        try:
            for name in args.chat or [DEFAULT_CHAT_MODEL]:
                with serve_local(locate_models(chat=name)) as servers:
                    assert servers.chat is not None and servers.embed is not None
                    with ChatClient(servers.chat, cache=cache) as chat, \
                            Embedder(servers.embed, cache=cache) as emb:
                        results.append(bench_distill(corpora, chat, emb, th, k=args.k,
                                                     max_clusters=args.max_clusters))
        finally:
            if cache is not None:
                cache.close()
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    if args.json:
        _print_json(results)
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
                  f"{v(c['points_home']):>6} {_num(c['own_cosine_mean']):>6} "
                  f"{_num(c['best_other_cosine_mean']):>6} "
                  f"{_num(sec['median']):>7} {_num(tok['median']):>5}")
    return EXIT_OK


def _bench_pipeline(args: argparse.Namespace) -> int:
    from .bench import bench_pipeline

    figures = bench_pipeline(tuple(args.sizes), tuple(args.procedures), seed=args.seed)
    if args.json:
        _print_json(figures)
        return EXIT_OK
    print(f"detect and cluster (synthetic stores, {figures['dim']}-d pre-made vectors, "
          "embedding excluded; one run each, seconds)")
    for row in figures["detect_cluster"]:
        parts = [f"detect {row['detect_s']:.2f}"]
        for m in ("agglomerative", "gaia-greedy", "hdbscan"):
            v = row.get(f"{m}_s")
            parts.append(f"{m} {v:.2f}" if v is not None else f"{m} skipped")
        print(f"  {row['sessions']:>7} sessions: " + ", ".join(parts))
    print("recall latency (FAISS flat inner product, top_k 2)")
    for r in figures["recall"]:
        print(f"  {r['procedures']:>7} procedures: median {r['median_ms']:.3f} ms, "
              f"p99 {r['p99_ms']:.3f} ms (n={r['n']} queries)")
    return EXIT_OK


def _bench_tuning(args: argparse.Namespace) -> int:
    from .bench import bench_tuning

    with _clients(args) as (chat, emb):
        f = bench_tuning(emb, chat, sessions=args.sessions, repeats=args.repeats)
    if args.json:
        _print_json(f)
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


def _corpus_generate(args: argparse.Namespace) -> int:
    from .corpora import NoiseConfig, generate_corpus

    rep = generate_corpus(args.db, families=args.families, seed=args.seed,
                          attempts=args.attempts,
                          noise=NoiseConfig(args.fail_rate, args.explore_rate, args.abandon_rate))
    print(f"wrote {rep.db_path} ({rep.sessions} sessions, {rep.families} families, seed "
          f"{rep.seed}) and labels {rep.labels_path}")
    return EXIT_OK


def _corpus_import(args: argparse.Namespace) -> int:
    from .corpora import import_corpus

    rep = import_corpus(args.format, args.src, args.db, tasks=args.tasks,
                        skip_bad=args.skip_bad, labels_path=args.labels,
                        progress=not args.json and sys.stderr.isatty())
    if args.json:
        _print_json(rep.as_dict())
        return EXIT_OK
    print(f"imported {rep.sessions_imported} sessions ({rep.calls_imported} tool calls) from "
          f"{len(rep.files)} file(s) into {rep.db_path}; labels in {rep.labels_path}")
    for what, n in (("sessions without a tool call (no tool_history rows)",
                     rep.sessions_without_calls),
                    ("sessions without a user turn (no goal; not guessed)",
                     rep.sessions_without_goal),
                    ("sessions already in the corpus, left alone", rep.already_present)):
        if n:
            print(f"  {n} {what}")
    for flag, n in rep.flags.items():
        print(f"  {n} sessions flagged {flag}")
    if rep.skipped:
        print(f"  {len(rep.skipped)} bad records skipped:")
        for s in rep.skipped:
            print(f"    {s['error']}")
    return EXIT_OK


def _corpus_stats(args: argparse.Namespace) -> int:
    from .corpora import corpus_stats

    st = corpus_stats(args.db, labels_path=args.labels)
    if args.json:
        _print_json(st.as_dict())
        return EXIT_OK
    for k, v in st.as_dict().items():
        if isinstance(v, dict):
            v = ", ".join(f"{a} {b:g}" if isinstance(b, float) else f"{a} {b}"
                          for a, b in v.items()) or "-"
        elif isinstance(v, float):
            v = f"{v:.3f}"
        print(f"{k.replace('_', ' '):<24} {'-' if v is None else v}")
    return EXIT_OK


def _corpus_export(args: argparse.Namespace) -> int:
    from .corpora import export_jsonl

    n = export_jsonl(args.db, args.out, labels_path=args.labels)
    print(f"wrote {n} tool calls to {args.out}")
    return EXIT_OK


# ---------------------------------------------------------------------- pipeline
@contextlib.contextmanager
def _clients(args: argparse.Namespace) -> Iterator[tuple[Any, Any]]:
    """The chat client and embedder of the chosen backend (never a fallback)."""
    from .backend import BackendSpec, open_clients
    from .serve import models_home

    cache = None if args.no_cache else str(args.cache or models_home() / "cache.db")
    spec = BackendSpec(args.backend, chat_model=args.model, embed_model=args.embed_model,
                       cache=cache, timeout_s=args.timeout)
    with open_clients(spec) as clients:
        yield clients


def _embed_model_id(args: argparse.Namespace) -> str:
    """The embedding model the chosen backend will use (its calibration applies)."""
    if args.backend == "local":
        from .serve import EMBED_MODEL_ID

        return EMBED_MODEL_ID
    from .llm import LEMONADE_EMBED_MODEL

    return str(args.embed_model or LEMONADE_EMBED_MODEL)


def _thresholds(args: argparse.Namespace) -> Thresholds:
    """--config and --set over the backend's embedder calibration over GAIA's defaults."""
    return load_thresholds(args.config, overrides=_parse_sets(args.set),
                           embedder=_embed_model_id(args))


def _synthesize(args: argparse.Namespace) -> int:
    from .embed import check_store_embedder
    from .synthesize import synthesize_skills

    th = _thresholds(args)
    with MemoryStore.open(args.db, read_only=args.dry_run) as store, _clients(args) as (c, e):
        if not args.dry_run:
            check_store_embedder(store, e)
        rep = synthesize_skills(store, c, e, th, method=args.method, rate=args.rate,
                                mode=args.mode, dry_run=args.dry_run)
    if args.json:
        _print_json(rep.as_dict())
    else:
        for k, v in rep.as_dict().items():
            if v not in ((), {}, "", 0) or k in ("status", "added"):
                print(f"{k:<22} {v}")
    return EXIT_OK if rep.status in ("ran", "dry-run", "synthesis-disabled",
                                     "memory-disabled") else EXIT_FAIL


def _recall(args: argparse.Namespace) -> int:
    from .recall import recall

    th = _thresholds(args)
    from .recall import ProcedureIndex

    with MemoryStore.open(args.db, read_only=True) as store, _clients(args) as (_, e):
        index = ProcedureIndex.from_store(store)
        hits = recall(store, e, args.goal, th, index=index, touch=False)
    if index.unembedded:
        print(f"note: {index.unembedded} active procedure(s) have no embedding and cannot be "
              "recalled", file=sys.stderr)
    rows = [{"id": h.procedure.id, "name": h.procedure.name, "score": round(h.score, 4),
             "when_to_use": h.procedure.when_to_use} for h in hits]
    if args.json:
        _print_json(rows)
    else:
        for r in rows:
            print(f"{r['score']:.3f}  {r['id']}  {r['name']}: {r['when_to_use']}")
        if not rows:
            print(f"nothing at cosine >= {th.effective_recall_tau}")
    return EXIT_OK


def _procedures(args: argparse.Namespace) -> int:
    from .export import export_skill

    action = args.procedures_command
    with MemoryStore.open(args.db, read_only=action in ("list", "show")) as store:
        if action == "list":
            rows = [{"id": p.id, "name": p.name, "enabled": p.enabled,
                     "superseded_by": p.superseded_by, "success_count": p.success_count,
                     "attempt_count": p.attempt_count} for p in store.procedures()]
            if args.json:
                _print_json(rows)
            for r in rows if not args.json else ():
                state = "superseded" if r["superseded_by"] else (
                    "enabled" if r["enabled"] else "disabled")
                print(f"{r['id']}  {r['name']:<40} {state:<10} "
                      f"{r['success_count']}/{r['attempt_count']}")
            return EXIT_OK
        proc = store.get_procedure(args.id)
        if proc is None:
            raise SkillsynthError(f"{args.db}: no procedure with id {args.id!r}")
        if action == "show":
            _print_json({k: v for k, v in proc.__dict__.items() if k != "embedding"}
                        | {"embedding_dims": None if proc.embedding is None
                           else len(proc.embedding) // 4})
        elif action in ("enable", "disable"):
            store.set_procedure_enabled(proc.id, action == "enable")
            print(f"{proc.id}: {action}d")
        else:
            out = export_skill(store, proc.id, args.out, args.profile, overwrite=args.overwrite)
            print(f"wrote {out / 'SKILL.md'} ({args.profile}, valid)")
    return EXIT_OK


# ---------------------------------------------------------------------- parser
# ---------------------------------------------------------------------- evaluation
def _eval_point(args: argparse.Namespace) -> int:
    from .evaluation import EvalConfig, run_point

    th = _thresholds(args)
    cfg = EvalConfig(args.corpus, strategy=args.strategy, thresholds=th, k=args.k,
                     mode=args.mode, seed=args.seed, labels=args.labels, live=args.live,
                     step_limit=args.step_limit, family=args.family)
    with _clients(args) as (chat, emb):
        res = run_point(cfg, chat, emb, args.out, progress=True)
    if args.json:
        _print_json({k: v.as_dict() for k, v in res.kpis.items()})
    else:
        for k in res.kpis.values():
            print(k)
    print(f"point written to {res.out_dir}", file=sys.stderr)
    return EXIT_OK


def _calibrate(args: argparse.Namespace) -> int:
    from .calibrate import CalibrationCorpus, calibrate

    corpora = [CalibrationCorpus.parse(c) for c in args.corpora]
    base = _thresholds(args)
    with _clients(args) as (chat, emb):
        cal = calibrate(corpora, emb, llm=None if args.no_recall else chat, mode=args.mode,
                        k=args.k, min_occurrences=args.min_occurrences, base=base)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(cal.to_json(), encoding="utf-8")
    if args.write_settings:
        from .tuning import write_settings_block

        write_settings_block(base.merge(cal.settings_block()), args.write_settings,
                             overwrite=args.overwrite)
    if args.json:
        print(cal.to_json(), end="")
        return EXIT_OK
    print(f"embedder {cal.embedder}; chat model {cal.chat_model or '-'}; {cal.method}")
    for c in cal.corpora:
        print(f"  {c['path']} ({c['family']}): {c['goals']} distinct goals, {c['families']} "
              f"families, {c['pairs']} pairs ({c['same_family_pairs']} same-family)"
              + (f"; recall: {c['recall']['queries']} held-out goals, "
                 f"{c['recall']['procedures']} procedures" if "recall" in c else ""))
    for table, tau in (("clustering", cal.similarity_tau), ("recall", cal.recall_tau)):
        if tau is None:
            continue
        print(f"{table}: tau   precision  recall  F1   (mean over corpora)")
        for row in getattr(cal, table):
            if abs(row.tau - tau) <= 0.1 + 1e-9 and round(row.tau * 100) % 5 == 0 \
                    or abs(row.tau - tau) < 1e-9:
                mark = "  <- proposed" if abs(row.tau - tau) < 1e-9 else ""
                print(f"  {row.tau:.2f}  {_num(row.precision)}  {_num(row.recall)}  "
                      f"{_num(row.f1)}{mark}")
    print("settings block: " + json.dumps({"skill_synthesis": cal.settings_block()}))
    return EXIT_OK


def _num(x: float | None) -> str:
    return "   -  " if x is None else f"{x:6.3f}"


def _sweep(args: argparse.Namespace) -> int:
    from .evaluation.sweep import run_sweep

    rep = run_sweep(args.spec, results_root=args.results, workers=args.workers,
                    cache=args.cache)
    print(f"sweep {rep.run_dir}: {rep.points} point(s): ran {len(rep.ran)}, already done "
          f"{len(rep.skipped)}, failed {len(rep.failed)}; {rep.wall_s:.1f} s; "
          f"LLM calls {rep.llm_calls}, cache hits {rep.cache_hits}")
    for pid, why in rep.failed.items():
        print(f"  failed {pid}: {why.splitlines()[0]}", file=sys.stderr)
    return EXIT_FAIL if rep.failed else EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from .evaluation.report import render_report

    html = render_report(args.run, baseline=args.baseline, out_html=args.out)
    print(f"report: {html}")
    print(f"plots:  {Path(args.run) / 'plots'}")
    return EXIT_OK


def _gate(args: argparse.Namespace) -> int:
    from .evaluation.report import gate

    checks = gate(args.run, args.baseline)
    bad = [c for c in checks if not c.ok]
    for c in (checks if args.verbose else bad):
        v = "n/a" if c.value is None else f"{c.value:.3f}"
        print(f"{'ok  ' if c.ok else 'FAIL'} {c.point} {c.check}: {v} (needs {c.required})")
    print(f"gate: {len(checks) - len(bad)} of {len(checks)} check(s) passed")
    return EXIT_FAIL if bad else EXIT_OK


def _baseline(args: argparse.Namespace) -> int:
    from .evaluation.report import write_baseline

    tols: dict[str, float] = {}
    better: dict[str, str] = {}
    for item in args.kpi:
        name, _, rest = item.partition("=")
        tol, _, direction = rest.partition(":")
        try:
            tols[name] = float(tol)
        except ValueError:
            raise _UsageError(f"--kpi wants NAME=TOLERANCE[:higher|lower], got {item!r}") from None
        better[name] = direction or "higher"
    out = write_baseline(args.run, args.out, kpis=tols, better=better,
                         description=args.description, overwrite=args.overwrite)
    print(f"baseline written: {out}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; every command and option carries help text."""
    parser = argparse.ArgumentParser(
        prog="skillsynth",
        description="Skill auto-synthesis research toolkit over GAIA's memory.db.")
    parser.add_argument("--version", action="version", version=f"skillsynth {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(group: Any, name: str, help_: str, fn: Callable[[argparse.Namespace], int]
                ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(name, help=help_, description=help_)
        p.set_defaults(func=fn)
        return p

    db = sub.add_parser("db", help="create, migrate and inspect GAIA memory.db files",
                        description="Create, migrate and inspect GAIA memory.db files.")
    dbs = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    p = command(dbs, "init", "create a new memory.db with GAIA's current (v3) schema", _db_init)
    p.add_argument("path", help="the database file to create (must not exist)")
    p = command(dbs, "migrate", "migrate a memory.db to v3 additively (no row changes)",
                _db_migrate)
    p.add_argument("path", help="the database file to migrate (back it up first)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the steps without changing the file")
    p = command(dbs, "info", "schema version and row counts (opens read-only)", _db_info)
    p.add_argument("path", help="the database file to inspect")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")

    sk = sub.add_parser("skill", help="render and validate SKILL.md files",
                        description="Render and validate SKILL.md files.")
    sks = sk.add_subparsers(dest="skill_command", metavar="ACTION", required=True)
    p = command(sks, "validate", "validate a skill directory; exit 1 with one error per line",
                _skill_validate)
    p.add_argument("dir", help="the skill directory (holds SKILL.md; named like the skill)")
    p.add_argument("--profile", choices=PROFILES, required=True,
                   help="gaia691: GAIA #691's rules; agentskills: the real skills-ref validator")
    p = command(sks, "render", "turn an LLM's intermediate skill into <out>/<name>/SKILL.md",
                _skill_render)
    p.add_argument("file", help="the intermediate document (name, when_to_use, tools_required)")
    p.add_argument("--profile", choices=PROFILES, required=True, help="the SKILL.md profile")
    p.add_argument("--out", required=True, help="the folder to write <name>/SKILL.md under")
    p.add_argument("--overwrite", action="store_true", help="replace an existing SKILL.md")

    cfg = sub.add_parser("config", help="show resolved thresholds",
                         description="Show resolved thresholds.")
    cfgs = cfg.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    p = command(cfgs, "show", "thresholds after file, SKILLSYNTH_* environment and --set",
                _config_show)
    p.add_argument("--settings", default=None,
                   help="a GAIA memory_settings.json or a YAML file of thresholds")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one threshold (repeatable)")
    p.add_argument("--embedder", default=None, metavar="MODEL_ID",
                   help="apply this embedder's shipped calibration (e.g. all-MiniLM-L6-v2-f16, "
                   "the embedded one); default: none, GAIA's defaults")
    p.add_argument("--json", action="store_true",
                   help="print the memory_settings.json skill_synthesis block")

    mo = sub.add_parser("models", help="prepare, serve and check the model backends",
                        description="Prepare, serve and check the model backends.")
    mos = mo.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    home_help = "models home (default $SKILLSYNTH_HOME or ~/.cache/skillsynth)"
    from .chat_models import DEFAULT_CHAT_MODEL, chat_model_names

    chat_names = ", ".join(chat_model_names())
    p = command(mos, "prepare", "install or locate llama-server and the embedded models "
                "(idempotent)", _models_prepare)
    p.add_argument("--home", default=None, help=home_help)
    p.add_argument("--chat", action="append", default=[], metavar="NAME",
                   help=f"embedded chat model to prepare (repeatable; {chat_names}; default "
                   f"{DEFAULT_CHAT_MODEL})")
    chat_help = f"embedded chat model ({chat_names}; default {DEFAULT_CHAT_MODEL})"
    p = command(mos, "serve", "run the embedded chat and embedding servers until Ctrl-C",
                _models_serve)
    p.add_argument("--home", default=None, help=home_help)
    p.add_argument("--chat", default=None, metavar="NAME", help=chat_help)
    p.add_argument("--no-chat", action="store_true", help="do not start the chat server")
    p.add_argument("--no-embed", action="store_true", help="do not start the embedding server")
    p.add_argument("--threads", type=int, default=None, help="CPU threads per server")
    p = command(mos, "status", "which backends and models are reachable, with their ids",
                _models_status)
    p.add_argument("--home", default=None, help=home_help)
    p.add_argument("--lemonade-url", default=None,
                   help="Lemonade base URL (default $LEMONADE_BASE_URL or "
                   "http://localhost:13305/api/v1)")
    p.add_argument("--no-start", action="store_true",
                   help="do not start the embedded servers to probe them")
    p.add_argument("--chat", default=None, metavar="NAME", help=chat_help)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")

    be = sub.add_parser("bench", help="print performance figures",
                        description="Print performance figures (medians with n).")
    bes = be.add_subparsers(dest="bench_command", metavar="TARGET", required=True)
    p = command(bes, "pipeline", "detect/cluster time per method and recall latency on "
                "synthetic stores", _bench_pipeline)
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000],
                   help="sessions per synthetic store")
    p.add_argument("--procedures", type=int, nargs="+", default=[100, 10_000, 100_000],
                   help="procedure counts for recall latency")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = command(bes, "models", "tokens/s, embeddings/s and cached-call latency of the "
                "embedded models", _bench_models)
    p.add_argument("--home", default=None, help=home_help)
    p.add_argument("--repeats", type=int, default=5, help="runs per figure (median reported)")
    p.add_argument("--chat", default=None, metavar="NAME", help=chat_help)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")

    def model_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--backend", choices=("local", "lemonade"), default="local",
                       help="local: the embedded llama-server models; lemonade: Lemonade Server")
        p.add_argument("--model", default=None,
                       help=f"chat model: local, an embedded name ({chat_names}; default "
                       f"{DEFAULT_CHAT_MODEL}); lemonade, a model id (default "
                       "Gemma-4-E4B-it-GGUF)")
        p.add_argument("--embed-model", default=None, help="embedding model id (lemonade)")
        p.add_argument("--timeout", type=float, default=300.0,
                       help="seconds per model request (a first Lemonade load can take minutes)")
        p.add_argument("--cache", default=None,
                       help="call cache file (default <models home>/cache.db)")
        p.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
        p.add_argument("--config", default=None,
                       help="memory_settings.json or YAML thresholds")
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override one threshold (repeatable)")
        p.add_argument("--json", action="store_true", help="print JSON instead of text")

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
    p = command(bes, "tuning", "seconds per tuning-view update on a synthetic corpus",
                _bench_tuning)
    p.add_argument("--sessions", type=int, default=10_000, help="corpus size")
    p.add_argument("--repeats", type=int, default=5, help="updates per figure (median)")
    model_options(p)

    p = command(sub, "synthesize", "run one synthesis pass over a memory.db", _synthesize)
    p.add_argument("db", help="the memory.db (written: procedures and meta.embedder_id)")
    p.add_argument("--method", choices=("agglomerative", "hdbscan", "gaia-greedy", "per-session"),
                   default="agglomerative", help="goal clustering method")
    p.add_argument("--rate", choices=("calls", "session"), default="calls",
                   help="success rate per tool call (GAIA) or per session")
    p.add_argument("--mode", choices=("yaml", "json"), default="yaml",
                   help="free-form YAML distillation (GAIA) or JSON-schema constrained")
    p.add_argument("--dry-run", action="store_true",
                   help="detect and cluster only; no model call, nothing written")
    model_options(p)
    p = command(sub, "recall", "the procedures a goal would recall (read-only)", _recall)
    p.add_argument("db", help="the memory.db")
    p.add_argument("goal", help="the new goal, in quotes")
    model_options(p)

    pr = sub.add_parser("procedures", help="list, inspect, enable, disable and export procedures",
                        description="List, inspect, enable, disable and export procedures.")
    prs = pr.add_subparsers(dest="procedures_command", metavar="ACTION", required=True)
    p = command(prs, "list", "every procedure with its state and record", _procedures)
    p.add_argument("db", help="the memory.db")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    for name, help_ in (("show", "one procedure as JSON"),
                        ("enable", "make a procedure recallable again"),
                        ("disable", "never recall a procedure (nothing is deleted)"),
                        ("export", "write a procedure as <out>/<name>/SKILL.md")):
        p = command(prs, name, help_, _procedures)
        p.add_argument("db", help="the memory.db")
        p.add_argument("id", help="the procedure id (proc_...)")
        if name == "export":
            p.add_argument("--out", required=True, help="the folder to write into")
            p.add_argument("--profile", choices=PROFILES, default="agentskills",
                           help="SKILL.md profile (agentskills is valid under both validators)")
            p.add_argument("--overwrite", action="store_true", help="replace an existing file")

    co = sub.add_parser("corpus", help="build replayed tool_history corpora",
                        description="Build replayed tool_history corpora.")
    cos = co.add_subparsers(dest="corpus_command", metavar="ACTION", required=True)
    p = command(cos, "generate", "a seeded synthetic corpus with ground-truth labels",
                _corpus_generate)
    p.add_argument("db", help="the memory.db to create (labels go to <db>.labels.sqlite)")
    p.add_argument("--families", type=int, default=8, help="task families (1-8 built in)")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--attempts", type=int, default=5, help="sessions per family")
    p.add_argument("--fail-rate", type=float, default=0.1,
                   help="chance a step fails once and is retried")
    p.add_argument("--explore-rate", type=float, default=0.1,
                   help="chance of an exploratory call before a step")
    p.add_argument("--abandon-rate", type=float, default=0.1,
                   help="chance a session stops before its last step (fails)")

    p = command(cos, "import", "import agent trajectories or a GAIA memory.db as a corpus",
                _corpus_import)
    p.add_argument("--format", required=True, choices=("taubench", "tau2", "gaia-db", "jsonl"),
                   help="the source format (see the corpora section of the README)")
    p.add_argument("src", nargs="+", help="source files or folders (.json, .json.gz, .jsonl)")
    p.add_argument("db", help="the corpus memory.db (created when missing)")
    p.add_argument("--tasks", help="tau2: a tasks file for simulations whose file lacks "
                                   "their task")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip and count bad records instead of stopping at the first")
    p.add_argument("--labels", help="the labels file (default <db>.labels.sqlite)")
    p.add_argument("--json", action="store_true", help="print the import report as JSON")
    p = command(cos, "stats", "what a corpus holds (read-only)", _corpus_stats)
    p.add_argument("db", help="the corpus memory.db")
    p.add_argument("--labels", help="the labels file (default <db>.labels.sqlite)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = command(cos, "export", "write a corpus as skillsynth JSONL (one line per tool call)",
                _corpus_export)
    p.add_argument("db", help="the corpus memory.db (read-only)")
    p.add_argument("out", help="the .jsonl file to write")
    p.add_argument("--labels", help="the labels file (default <db>.labels.sqlite)")

    p = command(sub, "eval", "run the 4th-attempt protocol once on a corpus (one point)",
                _eval_point)
    p.add_argument("corpus", help="the corpus memory.db (labels beside it)")
    p.add_argument("out", help="the point's folder (written)")
    p.add_argument("--strategy", default="skillsynth",
                   choices=("skillsynth", "gaia-greedy", "cortexprism", "pheron", "none"),
                   help="the procedural-memory design under test")
    p.add_argument("--k", type=int, default=3, help="history attempts per family (probe: k+1)")
    p.add_argument("--family", choices=("task", "tools"), default="task",
                   help="family rule: the same task, or tasks with the same state-changing "
                        "ground-truth tools (tests generalisation)")
    p.add_argument("--mode", choices=("yaml", "json"), default="json",
                   help="distillation mode")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--labels", help="the labels file (default <corpus>.labels.sqlite)")
    p.add_argument("--live", action="store_true",
                   help="also run the live agent (both arms per probe, function calling)")
    p.add_argument("--step-limit", type=int, default=12,
                   help="the live agent's most tool calls per arm")
    model_options(p)
    p = command(sub, "calibrate", "measure same- vs different-family similarity on labelled "
                "corpora and propose similarity_tau and recall_tau for an embedder", _calibrate)
    p.add_argument("corpora", nargs="+", metavar="CORPUS[::FAMILY]",
                   help="a labelled corpus database (corpus import/generate); ::tools reads "
                   "its families by the tools rule (default ::task)")
    p.add_argument("--no-recall", action="store_true",
                   help="calibrate clustering only (no synthesis pass, no chat model)")
    p.add_argument("--k", type=int, default=3, help="attempts per family in the recall pass's "
                   "history")
    p.add_argument("--mode", choices=("json", "yaml"), default="json",
                   help="distillation mode of the recall pass")
    p.add_argument("--min-occurrences", type=int, default=2,
                   help="cluster size that qualifies in the recall pass (more procedures to "
                   "measure; the proposal is for recall, not for min_occurrences)")
    p.add_argument("--out", default=None, help="write the calibration JSON here")
    p.add_argument("--write-settings", default=None, metavar="FILE",
                   help="write the proposal as a memory_settings.json skill_synthesis block")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the block of an existing --write-settings file")
    model_options(p)
    p = command(sub, "sweep", "run a sweep spec through papermill (resumable)", _sweep)
    p.add_argument("spec", help="a sweep spec, e.g. eval/sweeps/synthetic-3x3x3.yaml")
    p.add_argument("--results", default="eval/results", help="where <name>/ is written")
    p.add_argument("--workers", type=int, default=None,
                   help="points at once (default: the spec's workers)")
    p.add_argument("--cache", default=None,
                   help="call cache file (default <models home>/cache.db)")
    p = command(sub, "report", "render a sweep run's KPI report to HTML and PNGs", _report)
    p.add_argument("run", help="the run folder, e.g. eval/results/main")
    p.add_argument("--baseline", help="an eval/baselines/*.json to compare with")
    p.add_argument("--out", help="the HTML file (default <run>/report.html)")
    p = command(sub, "gate", "fail on validity < 100%%, a misbehaving floor or a KPI "
                "regression", _gate)
    p.add_argument("run", help="the run folder")
    p.add_argument("--baseline", help="an eval/baselines/*.json with tolerances")
    p.add_argument("--verbose", action="store_true", help="print passing checks too")
    p = command(sub, "baseline", "commit a run's KPI values as a baseline with tolerances",
                _baseline)
    p.add_argument("run", help="the run folder")
    p.add_argument("out", help="the baseline file, e.g. eval/baselines/ci.json")
    p.add_argument("--kpi", action="append", default=[], required=True,
                   metavar="NAME=TOL[:higher|lower]",
                   help="a KPI to hold, its tolerance and which way is better (repeatable)")
    p.add_argument("--description", default="", help="what the baseline is for")
    p.add_argument("--overwrite", action="store_true", help="replace an existing baseline")

    p = command(sub, "demo", "build a small demo memory.db and skill files (no model calls)",
                _demo)
    p.add_argument("out", help="the folder to write memory.db and the skill files into")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier demo")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except _UsageError as exc:
        parser.exit(EXIT_USAGE, f"skillsynth: error: {exc}\n")
    except SkillsynthError as exc:
        print(f"skillsynth: error: {exc}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("skillsynth: interrupted", file=sys.stderr)
        return 130
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
