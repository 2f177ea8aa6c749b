"""The ``run`` and ``index`` commands: search every question of a split, or prebuild an index.

``run`` writes one ranking of ``--depth`` articles for every question of the split (TREC by
default, tagged with the retriever and its settings; or JSON ``{qid: {docid: score}}``), in the
order convention of :mod:`bsard_demo.runs.run`, so the file reads back with no problem through
:func:`bsard_demo.runs.read_run_path`. Progress bars go to stderr; errors the user can fix
(data, options, output path) are one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..dataset import DataError
from ..frame_memo import keeping
from ..retrievers import RetrieverSpec, build_retriever
from ..retrievers.batch import DEFAULT_QUERY_TEXT, QUERY_TEXTS, question_texts, ranked_pairs, run_tag, search_all
from ..retrievers.defaults import CHOICE as DEFAULT, CHOICE_HELP, default_spec
from ..retrievers.registry import Flag, kind, retriever_kinds
from ..runs import RUN_FORMATS, format_run, write_text_atomic
from ..sources import load_dataset
from .common import TqdmProgress, activate_index, add_data_argument, add_index_argument, data_spec, fail, say, trec_word
from .export import add_export_arguments, check_export_arguments, export_and_push, wants_export


def either(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def kind_flags() -> list[Flag]:
    """Every registered kind's flags, once each, in registration order, as ``--help`` lists them:
    those of no group first."""
    flags: dict[str, Flag] = {}
    for k in retriever_kinds().values():
        for flag in k.flags:
            flags.setdefault(flag.dest, flag)
    return sorted(flags.values(), key=lambda flag: flag.group is not None)


def add_retriever_arguments(p: argparse.ArgumentParser) -> None:
    """``--retriever`` and every kind's flags (``run``, ``index``, ``tune``), with the data and
    index arguments: the kinds' ungrouped flags first, then each kind's groups."""
    kinds = retriever_kinds()
    p.add_argument("--retriever", choices=(DEFAULT, *kinds), default=next(iter(kinds)),
                   help="; ".join([CHOICE_HELP] + [f"{k.name}: {k.summary.replace('`', '')}" for k in kinds.values()]))
    flags = kind_flags()
    for flag in flags:
        if flag.group is None:
            p.add_argument(*flag.names, **flag.keywords)
    add_data_argument(p)
    add_index_argument(p)
    groups: dict = {}
    for flag in flags:
        if flag.group is not None:
            if flag.group not in groups:
                groups[flag.group] = p.add_argument_group(flag.group)
            groups[flag.group].add_argument(*flag.names, **flag.keywords)
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="index cache folder (default $BSARD_CACHE or ~/.cache/bsard_demo)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")


def add_run_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``run``: search every question of a split and write a run file."""
    p = subparsers.add_parser(
        "run", help="search every question of a split and write a run file",
        description="Search every question of a split with a retriever and write the rankings as a run file "
                    "(TREC 'qid Q0 docid rank score tag' by default, or JSON {qid: {docid: score}}).")
    add_retriever_arguments(p)
    p.add_argument("--split", default="test", help="question split (default: test)")
    p.add_argument("--depth", type=int, default=500, help="articles per question (default: 500)")
    p.add_argument("--out", required=True, metavar="FILE", help="run file to write ('-' for stdout)")
    p.add_argument("--format", choices=RUN_FORMATS, default=None,
                   help="trec (default) or json; a FILE ending in .json defaults to json")
    p.add_argument("--query-text", choices=QUERY_TEXTS, default=DEFAULT_QUERY_TEXT,
                   help="text searched: the question alone (default: the BSARD paper's protocol) or the question "
                        "followed by its extra_description (what MTEB's BSARDRetrieval searches)")
    p.add_argument("--with-description", dest="query_text", action="store_const", const="question+description",
                   help="alias of --query-text question+description")
    p.add_argument("--no-with-description", dest="query_text", action="store_const", const="question",
                   help="alias of --query-text question")
    p.add_argument("--tag", default=None, help="run tag (default: the retriever and its settings)")
    p.set_defaults(func=cmd_run)
    return p


def add_index_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``index``: build a retriever's index into the cache, so later searches start fast."""
    p = subparsers.add_parser("index", help="prebuild a retriever's index into the cache, or export it as a bundle",
                              description="Build (or check) a retriever's cached index over a dataset's articles; "
                                          "--export DIR writes it as an index bundle, --push-to-hub publishes that.")
    add_retriever_arguments(p)
    add_export_arguments(p)
    p.set_defaults(func=cmd_index)
    return p


def _not_for(options: list[str], where: str, retriever: str) -> str:
    return f"{' and '.join(options)} appl{'y' if len(options) > 1 else 'ies'} to {where}, not {retriever}"


def given_flags(args: argparse.Namespace) -> list[Flag]:
    """The kinds' flags given on the command line (a value other than the flag's default)."""
    def given(flag: Flag) -> bool:
        value = getattr(args, flag.dest, None)
        return value is not None and value is not False and value != "" and value != flag.default

    return [flag for flag in kind_flags() if given(flag)]


def spec_from_args(args: argparse.Namespace) -> RetrieverSpec:
    """The retriever asked for on the command line: its kind's spec of the flags, once every flag
    given is one the kind reads (``--retriever default``: a stand-in until the data and the bundle
    are known, :func:`~bsard_demo.retrievers.defaults.default_spec`)."""
    given = given_flags(args)
    takers = [k.name for k in retriever_kinds().values() if k.takes]
    if args.retriever == DEFAULT:
        if given:
            raise ValueError(f"{' and '.join(f.names[0] for f in given)}: --retriever default takes no settings (it is "
                             f"the page's first system); give --retriever {either(takers)} to set them")
        return RetrieverSpec(next(iter(retriever_kinds())))
    chosen = kind(args.retriever)
    refused = [f for f in given if f.dest not in chosen.takes]
    if refused:
        # the kinds that read every refused flag, else those that read any of them
        where = ([k.name for k in retriever_kinds().values() if all(f.dest in k.takes for f in refused)]
                 or [k.name for k in retriever_kinds().values() if any(f.dest in k.takes for f in refused)])
        raise ValueError(_not_for([f.names[0] for f in refused], f"--retriever {either(where)}", chosen.name))
    return chosen.spec_of(vars(args))


def _build(args: argparse.Namespace, command: str, progress: TqdmProgress):
    """(dataset, retriever, its spec) or an exit code."""
    try:
        spec = spec_from_args(args)
        dataset = load_dataset(data_spec(args))
    except (DataError, ValueError) as exc:
        return fail(command, exc)
    activate_index(args, command, dataset)
    spec = spec_from_args(args)  # again, once the bundle is active: a bundled adapter's default weight reads it
    cache_root = Path(args.cache_dir).expanduser() if args.cache_dir else None
    if args.retriever == DEFAULT:
        spec = default_spec(dataset, cache_root)
        say(command, f"--retriever default: {spec.key()}")

    def notice(message: str) -> None:
        say(command, f"note: {message}")

    try:
        retriever = build_retriever(spec, dataset, cache_root=cache_root, progress=progress, notice=notice)
    except (DataError, ValueError) as exc:  # includes EncoderUnavailable
        return fail(command, exc)
    finally:
        progress.close()
    return dataset, retriever, spec


def _write(out: str, text: str) -> None:
    if out == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_text_atomic(out, text)


def cmd_run(args: argparse.Namespace) -> int:
    """Handler of ``run``; returns the exit code."""
    if args.depth < 1:
        return fail("run", "--depth must be at least 1")
    fmt = args.format or ("json" if str(args.out).lower().endswith(".json") else "trec")
    if args.tag is not None and not trec_word(args.tag):
        return fail("run", "--tag must be one word (no spaces)")
    progress = TqdmProgress(enabled=not args.no_progress)
    with keeping():  # the corpus' 29k texts, read by its fingerprints and indexes, derived once
        built = _build(args, "run", progress)
    if isinstance(built, int):
        return built
    dataset, retriever, _ = built
    try:
        questions = dataset.questions(args.split)
    except DataError as exc:
        return fail("run", exc)
    qids = [str(q) for q in questions["id"]]
    texts = question_texts(questions, query_text=args.query_text)
    try:
        hits = search_all(retriever, texts, args.depth, progress)
    except ValueError as exc:
        return fail("run", exc)
    finally:
        progress.close()
    tag = run_tag(args.tag) if args.tag else run_tag(retriever.name, args.query_text)
    try:
        _write(args.out, format_run(qids, ranked_pairs(hits), fmt, tag))
    except OSError as exc:
        return fail("run", f"cannot write {args.out}: {exc.strerror or exc}")
    where = "stdout" if args.out == "-" else args.out
    print(f"bsard_demo run: {len(qids)} questions × up to {min(args.depth, len(dataset.articles))} articles "
          f"({retriever.name}) written to {where} as {fmt}", file=sys.stderr)
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """Handler of ``index``; returns the exit code."""
    refused = check_export_arguments(args)
    if refused is not None:
        return refused
    progress = TqdmProgress(enabled=not args.no_progress)
    with keeping():  # as in cmd_run
        built = _build(args, "index", progress)
    if isinstance(built, int):
        return built
    dataset, retriever, spec = built
    print(f"bsard_demo index: {retriever.name} ready over {len(dataset.articles)} articles of {dataset.name}",
          file=sys.stderr)
    return export_and_push(args, dataset, spec, retriever) if wants_export(args) else 0
