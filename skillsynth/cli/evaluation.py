"""``skillsynth eval``, ``calibrate``, ``validate-calibration``, ``sweep``, ``report``,
``compare``, ``gate`` and ``baseline``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..evaluation.point.options import PointOptions, add_cli_options, cli_values
from ..evaluation.point.split import FamilyRule
from ._common import (
    EXIT_FAIL,
    EXIT_OK,
    UsageError,
    clients,
    command,
    model_options,
    num,
    print_json,
    thresholds_of,
    user_client,
    user_options,
)

__all__ = ["register"]


def _ideal_corpus(args: argparse.Namespace, world: str, k: int, family: FamilyRule) -> str:
    """``--history ideal``: the corpus's tasks executed in ``world``, k+1 times (once under
    family tools: :func:`~skillsynth.evaluation.point.ideal.ideal_attempts`); the new
    corpus's path, in the point's folder."""
    if args.labels:
        raise UsageError("--history ideal reads the labels beside the corpus and writes its "
                         "own; leave out --labels")
    if world == "replay":
        raise UsageError("--history ideal runs each task's reference in a world: add --world "
                         "tau2:DOMAIN (the corpus's domain)")
    from ..evaluation.live.worlds import get_world
    from ..evaluation.point.ideal import ideal_attempts, ideal_history

    built = ideal_history(get_world(world), args.corpus, Path(args.out) / "ideal-corpus.db",
                          attempts=ideal_attempts(k, family), progress=True)
    print(f"ideal history: {len(built.tasks) or built.already_present} task(s) x "
          f"{built.attempts}; {len(built.left_out)} left out; corpus {built.db_path}",
          file=sys.stderr)
    if built.sources_line():
        print(f"ideal history: {built.sources_line()}", file=sys.stderr)
    return built.db_path


def _eval_point(args: argparse.Namespace) -> int:
    from ..evaluation import EvalConfig, run_point

    opts = cli_values(args)
    tasks, corpus = opts["tasks"], args.corpus
    if args.history == "live":
        if not args.live:
            raise UsageError("--history live runs the agent: add --live")
        if tasks is None:
            raise UsageError("--history live needs --tasks ID,ID,... (the tasks the agent "
                             "attempts k+1 times)")
        if opts["world"] == "replay":  # the corpus argument names the world
            opts["world"] = args.corpus
        corpus = str(Path(args.out) / "live-corpus.db")
    elif args.history == "ideal":
        corpus = _ideal_corpus(args, opts["world"], opts["k"], opts["family"])
    elif args.world != "replay" and not args.live:
        raise UsageError("--world is where live probes run: add --live")
    cfg = EvalConfig(corpus, thresholds=thresholds_of(args), labels=args.labels, **opts)
    world = cfg.world
    with clients(args) as (chat, emb), user_client(args) as user:
        if args.history == "live":
            from ..evaluation.live.history import live_history
            from ..evaluation.live.worlds import get_world

            rep = live_history(get_world(world), chat, corpus, tasks=tasks or (),
                               attempts=cfg.k + 1, step_limit=cfg.step_limit,
                               temperature=cfg.temperature, policy=cfg.policy,
                               model=chat.model_id,
                               progress=True)
            print(f"live history: {rep.ran} run(s), {rep.already_present} kept, "
                  f"{rep.successes} succeeded; corpus {corpus}", file=sys.stderr)
        res = run_point(cfg, chat, emb, args.out, progress=True, user=user)
    if args.json:
        print_json({k: v.as_dict() for k, v in res.kpis.items()})
    else:
        for k in res.kpis.values():
            print(k)
    print(f"point written to {res.out_dir}", file=sys.stderr)
    return EXIT_OK


def _calibrate(args: argparse.Namespace) -> int:
    from ..evaluation.tuning.calibrate import CalibrationCorpus, calibrate, check_corpora

    corpora = [CalibrationCorpus.parse(c) for c in args.corpora]
    check_corpora(corpora)  # before any model server starts
    base = thresholds_of(args)
    with clients(args) as (chat, emb):
        cal = calibrate(corpora, emb, llm=None if args.no_recall else chat, mode=args.mode,
                        k=args.k, min_occurrences=args.min_occurrences, base=base)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(cal.to_json(), encoding="utf-8")
    if args.write_settings:
        from ..evaluation.tuning.session import write_settings_block

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
                print(f"  {row.tau:.2f}  {num(row.precision)}  {num(row.recall)}  "
                      f"{num(row.f1)}{mark}")
    print("settings block: " + json.dumps({"skill_synthesis": cal.settings_block()}))
    return EXIT_OK


def _validate_calibration(args: argparse.Namespace) -> int:
    from ..evaluation.tuning.calibrate import CalibrationCorpus, check_corpora
    from ..evaluation.tuning.validate import folds, leave_one_out, record_validation

    corpora = [CalibrationCorpus.parse(c) for c in args.corpora]
    folds(corpora)  # two or more, none twice, each labelled: before any model server starts
    check_corpora(corpora)
    if args.calibrated:
        raise UsageError("--calibrated would replace GAIA's thresholds, the comparison arm; "
                         "set other thresholds with --config or --set")
    base = thresholds_of(args)
    with clients(args) as (chat, emb):
        result = leave_one_out(corpora, emb, chat, args.out, base=base, k=args.k,
                               min_occurrences=args.min_occurrences, mode=args.mode,
                               seed=args.seed, n_boot=args.n_boot, progress=True)
    if args.calibration:
        record_validation(args.calibration, result)
        print(f"validation recorded in {args.calibration}", file=sys.stderr)
    if args.json:
        print_json(result.as_dict())
    else:
        print(result.table(), end="")
    print(f"table: {Path(args.out) / 'leave-one-out.md'}", file=sys.stderr)
    return EXIT_OK if result.passed is True else EXIT_FAIL


def _sweep(args: argparse.Namespace) -> int:
    from ..evaluation.sweeps.run import run_sweep

    if args.dry_run:
        from ..evaluation.sweeps.plan import plan_sweep
        from ..evaluation.sweeps.results_url import is_url

        if args.cluster or is_url(args.results):
            raise UsageError("--dry-run plans a sweep on this machine's results folder; "
                             "leave out --cluster and give --results a folder")
        print("\n".join(plan_sweep(args.spec, results_root=args.results).lines()))
        return EXIT_OK

    rep = run_sweep(args.spec, results_root=args.results, workers=args.workers,
                    cache=args.cache, cluster=args.cluster,
                    connect_timeout_s=args.connect_timeout, transport=args.transport,
                    mirror=args.mirror)
    where = (f" on Dask {rep.cluster} ({rep.workers} workers, {rep.transport} transport)"
             if rep.cluster else "")
    at = f"{rep.results_url} (local mirror {rep.run_dir})" if rep.results_url else rep.run_dir
    print(f"sweep {at}{where}: {rep.points} point(s): ran {len(rep.ran)}, already done "
          f"{len(rep.skipped)}, failed {len(rep.failed)}; {rep.wall_s:.1f} s; "
          f"LLM calls {rep.llm_calls}, cache hits {rep.cache_hits}")
    for pid, why in rep.failed.items():
        print(f"  failed {pid}: {why.splitlines()[0]}", file=sys.stderr)
    return EXIT_FAIL if rep.failed else EXIT_OK


def _report(args: argparse.Namespace) -> int:
    if args.for_issue:
        from ..evaluation.reporting.questions import for_issue

        print(for_issue(args.run, args.for_issue), end="")
        return EXIT_OK
    if args.markdown:
        from ..evaluation.reporting.markdown import markdown_summary

        if args.out:
            raise UsageError("--out names the HTML report's file, which --markdown does not "
                             "write: give the summary's file as --markdown FILE")
        text = markdown_summary(args.run, baseline=args.baseline, command=args.command)
        if args.markdown == "-":
            print(text, end="")
        else:
            Path(args.markdown).write_text(text, encoding="utf-8")
            print(f"markdown: {args.markdown}")
    else:
        from ..evaluation.reporting.report import render_report

        html = render_report(args.run, baseline=args.baseline, out_html=args.out)
        print(f"report: {html}")
        print(f"plots:  {Path(args.run) / 'plots'}")
    if args.record:
        from ..evaluation.reporting.measured import sweep_measurement
        from ..figures import record

        print(f"record: {record(sweep_measurement(args.run, command=args.command), args.record)}",
              file=sys.stderr if args.markdown == "-" else sys.stdout)  # stdout: the summary
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from ..evaluation.reporting.compare import BASES, compare_points
    from ..evaluation.reporting.controls import decoding
    from ..evaluation.reporting.loaded import load_run

    run_a = load_run(args.run)
    run_b = load_run(args.run_b) if args.run_b else None
    res = compare_points(run_a, args.a, args.b, run_b=run_b, bases=args.basis or BASES,
                         seed=args.seed)
    if args.json:
        print_json([c.as_dict() for c in res])
        return EXIT_OK
    print(f"A: {res[0].a} ({run_a.path})")
    print(f"B: {res[0].b} ({(run_b or run_a).path})")
    if line := decoding(run_a.summary.spec):
        print(line)
    print("memory arms, paired per probe on the probes both ran (each probe's runs averaged "
          "first), families resampled:")
    for c in res:
        print(f"  {c.line()}")
    return EXIT_OK


def _gate(args: argparse.Namespace) -> int:
    from ..evaluation.reporting.report import gate

    checks = gate(args.run, args.baseline, verdict=args.verdict)
    bad = [c for c in checks if not c.ok]
    for c in (checks if args.verbose else [c for c in checks if not c.ok or c.warn]):
        v = "n/a" if c.value is None else f"{c.value:.3f}"
        mark = "FAIL" if not c.ok else ("WARN" if c.warn else "ok  ")
        print(f"{mark} {c.point} {c.check}: {v} (needs {c.required})")
    warned = sum(c.warn for c in checks)
    print(f"gate: {len(checks) - len(bad)} of {len(checks)} check(s) passed"
          + (f"; {warned} undecided (WARN: passed, not shown to hold)" if warned else ""))
    return EXIT_FAIL if bad else EXIT_OK


def _baseline(args: argparse.Namespace) -> int:
    from ..evaluation.reporting.report import write_baseline

    tols: dict[str, float] = {}
    better: dict[str, str] = {}
    for item in args.kpi:
        name, _, rest = item.partition("=")
        tol, _, direction = rest.partition(":")
        try:
            tols[name] = float(tol)
        except ValueError:
            raise UsageError(f"--kpi wants NAME=TOLERANCE[:higher|lower], got {item!r}") from None
        better[name] = direction or "higher"
    out = write_baseline(args.run, args.out, kpis=tols, better=better,
                         description=args.description, overwrite=args.overwrite)
    print(f"baseline written: {out}")
    return EXIT_OK

def register(sub: Any) -> None:
    """Add this group's commands to the ``skillsynth`` parser."""
    p = command(sub, "eval", "run the 4th-attempt protocol once on a corpus (one point)",
                _eval_point)
    p.add_argument("corpus", help="the corpus memory.db (labels beside it); with --history "
                   "live, the world the agent generates its history in; with --history "
                   "ideal, the recorded corpus whose tasks are executed in --world")
    p.add_argument("out", help="the point's folder (written)")
    p.add_argument("--labels", help="the labels file (default <corpus>.labels.sqlite)")
    add_cli_options(p)  # one flag per point option, from PointOptions
    model_options(p)
    user_options(p)
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
    p = command(sub, "validate-calibration", "leave-one-corpus-out: calibrate on all corpora "
                "but one, run the held-out corpus at the proposal and at GAIA's thresholds, "
                "and say whether the proposal holds (exit 1 unless it holds on every corpus)",
                _validate_calibration)
    p.add_argument("corpora", nargs="+", metavar="CORPUS[::FAMILY]",
                   help="two or more labelled corpus databases; ::tools reads families by "
                   "the tools rule (default ::task), in the calibration and the points")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="where the points, leave-one-out.json and leave-one-out.md go (a "
                   "rerun resumes from the finished points)")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="a calibration JSON whose `validation` records the result")
    opts = PointOptions.defaults()  # the points' options, declared once
    p.add_argument("--k", type=int, default=opts["k"],
                   help=f"{PointOptions.doc('k')} (also the calibration's recall pass; "
                   f"default {opts['k']})")
    p.add_argument("--mode", choices=("json", "yaml"), default=opts["mode"],
                   help=f"{PointOptions.doc('mode')}, in calibration and points (default "
                   f"{opts['mode']})")
    p.add_argument("--min-occurrences", type=int, default=2,
                   help="cluster size that qualifies in the calibration's recall pass (the "
                   "points use the thresholds' min_occurrences)")
    p.add_argument("--seed", type=int, default=opts["seed"],
                   help=f"{PointOptions.doc('seed')} of the points (default {opts['seed']})")
    p.add_argument("--n-boot", type=int, default=opts["n_boot"],
                   help=f"{PointOptions.doc('n_boot')} (default {opts['n_boot']})")
    model_options(p)
    p = command(sub, "sweep", "run a sweep spec through papermill (resumable)", _sweep)
    p.add_argument("spec", help="a sweep spec, e.g. eval/sweeps/synthetic-3x3x3.yaml")
    p.add_argument("--results", default="eval/results",
                   help="where <name>/ is written: a folder, or an fsspec URL such as "
                   "s3://bucket/runs (the sweep runs in a local mirror and uploads each point "
                   "as it finishes; a re-run anywhere resumes from the URL)")
    p.add_argument("--mirror", default=None, metavar="DIR",
                   help="with a results URL: the local mirror (default: under the models "
                   "home, by URL); report and gate read it")
    p.add_argument("--dry-run", action="store_true",
                   help="print the points the sweep would run, resume or skip, with the live "
                   "runs and an upper bound on agent model calls; start nothing, write nothing")
    p.add_argument("--workers", type=int, default=None,
                   help="points at once (default: the spec's workers)")
    p.add_argument("--cache", default=None,
                   help="call cache file (default <models home>/cache.db)")
    p.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="run the points on the Dask scheduler at ADDRESS (e.g. "
                   "tcp://host:8786), or 'local' for a LocalCluster of --workers processes "
                   "here; default: a thread pool in this process")
    p.add_argument("--connect-timeout", type=float, default=None, metavar="SECONDS",
                   help="how long to try to reach the scheduler (default 10)")
    p.add_argument("--transport", choices=("auto", "shared", "shipped"), default="auto",
                   help="with --cluster ADDRESS: 'shared' = workers write the results folder "
                   "and the call cache (paths every worker can write, one host); 'shipped' "
                   "= the corpus and the cache travel to the workers and each point comes "
                   "back (no shared folder; several hosts); 'auto' (default) = shared when "
                   "every worker runs on this host, else shipped")
    p = command(sub, "report", "render a sweep run's KPI report to HTML and PNGs", _report)
    p.add_argument("run", help="the run folder, e.g. eval/results/main")
    p.add_argument("--baseline", help="an eval/baselines/*.json to compare with")
    p.add_argument("--out", help="the HTML file (default <run>/report.html)")
    p.add_argument("--record", metavar="DIR", default=None,
                   help="also write the run's headline KPIs per point (value, interval, n) as "
                   "the measurement record DIR/sweep-NAME.json (eval/figures/ feeds the docs' "
                   "Measured figures page); default: not recorded")
    p.add_argument("--command", default=None,
                   help="with --record or --markdown: the command line that reproduces the "
                   "run (default: the record names the sweep; the summary shows no line)")
    p.add_argument("--markdown", metavar="FILE", default=None,
                   help="instead of the HTML report, write the run's KPI summary as GitHub "
                   "Markdown to FILE ('-': print it), to paste on a pull request: the run, "
                   "#887's verdict, each point against its controls, the headline KPIs and "
                   "the gate (against --baseline when given); --command adds the line that "
                   "reproduces it")
    p.add_argument("--for-issue", metavar="ISSUE", default=None,
                   help="instead of the report, print a Markdown block for an upstream GAIA "
                   "question (2676, 4033, 2685, 1818 or 1828, tau): figures with n and "
                   "intervals, settings, the reading and the command that reproduces them")
    p = command(sub, "compare", "one point's memory arm against another's, paired per probe "
                "(gold actions, gold writes, success), with an interval and the probes each "
                "does better on", _compare)
    p.add_argument("run", help="the run folder of point A (and of B unless --run-b)")
    p.add_argument("a", help="point A: its id, a unique id prefix or a unique strategy")
    p.add_argument("b", help="point B, the same way (e.g. mismatched)")
    p.add_argument("--run-b", default=None, metavar="RUN",
                   help="point B's run folder, a sweep of the same probes run alike (refused, "
                   "naming what differs, where the world, model, decoding, history or corpus "
                   "does)")
    p.add_argument("--basis", action="append", choices=("progress", "writes", "success",
                                                        "replay"), default=None,
                   help="what to compare (repeatable): progress = the share of the task's "
                   "gold actions executed, writes = of its gold writes, success, replay = the "
                   "replay estimate's step reduction (default: progress, writes, success)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    p.add_argument("--json", action="store_true", help="print the comparisons as JSON")
    p = command(sub, "gate", "fail on validity < 100%%, a misbehaving floor or a KPI "
                "regression", _gate)
    p.add_argument("run", help="the run folder")
    p.add_argument("--baseline", help="an eval/baselines/*.json with tolerances")
    p.add_argument("--verbose", action="store_true", help="print passing checks too")
    p.add_argument("--verdict", action="store_true",
                   help="also fail on a #887 criterion whose verdict is FAIL at the recommended "
                   "point or at GAIA's defaults (the report's verdict table)")
    p = command(sub, "baseline", "commit a run's KPI values as a baseline with tolerances",
                _baseline)
    p.add_argument("run", help="the run folder")
    p.add_argument("out", help="the baseline file, e.g. eval/baselines/ci.json")
    p.add_argument("--kpi", action="append", default=[], required=True,
                   metavar="NAME=TOL[:higher|lower]",
                   help="a KPI to hold, its tolerance and which way is better (repeatable)")
    p.add_argument("--description", default="", help="what the baseline is for")
    p.add_argument("--overwrite", action="store_true", help="replace an existing baseline")
