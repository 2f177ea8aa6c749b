"""Every CLI subcommand on hostile files, folders, options and a faulty hub: exit code 2, ONE
line on stderr, never a traceback. The full matrix runs in-process (``main([...])``); a
representative subset, and truly unreadable files (as user ``nobody``), through the real
interpreter."""
from __future__ import annotations

import builtins
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pandas as pd
import pytest

from bsard_demo import sources
from bsard_demo.cli.common import one_line
from bsard_demo.cli.main import main
from bsard_demo.runs import read as run_read

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("data", "evaluate", "compare", "run", "index")

ARTICLES = pd.DataFrame({"id": ["1", "2", "3"], "article": ["Le bail est conclu pour neuf ans.",
                                                           "La garantie locative est de deux mois.",
                                                           "Le divorce est prononcé par le tribunal."]})
QUESTIONS = pd.DataFrame({"id": ["10", "11"], "category": ["Logement", "Famille"], "subcategory": ["", ""],
                          "question": ["Combien de garantie locative ?", "Comment divorcer ?"],
                          "extra_description": ["", ""], "article_ids": ["2", "3"]})
GOOD_RUN = "10 Q0 2 1 3.5 t\n10 Q0 1 2 1.0 t\n11 Q0 3 1 2.0 t\n"


def good_folder(root: Path) -> Path:
    folder = root / "data"
    folder.mkdir(parents=True)
    ARTICLES.to_csv(folder / "articles.csv", index=False)
    QUESTIONS.to_csv(folder / "questions_test.csv", index=False)
    return folder


def argv(command: str, data: str, tmp: Path, run: str | None = None) -> list[str]:
    """A valid command line of ``command`` on dataset ``data``, everything else in order."""
    if command == "data":
        return ["data", "--data", data]
    if command == "evaluate":
        if run is None:
            run = str(tmp / "good.trec")
            Path(run).write_text(GOOD_RUN)
        return ["evaluate", run, "--data", data, "--k", "1"]
    if command == "compare":
        good = tmp / "good.trec"
        good.write_text(GOOD_RUN)
        return ["compare", str(good), run or str(good), "--data", data, "--measure", "recall@1"]
    common = ["--data", data, "--cache-dir", str(tmp / "cache"), "--no-progress"]
    if command == "run":
        return ["run", *common, "--out", str(tmp / "out.trec"), "--depth", "3"]
    return ["index", *common]


def one_line_failure(capsys, args: list[str], *phrases: str, rc: int = 2) -> str:
    """Run ``main(args)`` and check: exit code ``rc``, one line on stderr holding ``phrases``."""
    try:
        code = main(args)
    except SystemExit as exc:  # argparse
        code = exc.code
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == rc, (args, err)
    assert len(lines) == 1 and lines[0].strip(), err
    assert "Traceback" not in err and "Traceback" not in out
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])
    return lines[0]


def test_the_good_inputs_succeed(tmp_path, capsys):
    """The baseline of every fault below: all commands succeed on the good folder and run."""
    data = str(good_folder(tmp_path))
    for command in COMMANDS:
        assert main(argv(command, data, tmp_path)) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "error" not in err and "warning" not in err


# -- broken dataset folders -------------------------------------------------------------------

BINARY = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)


# name -> (how to break a good folder, phrase of the message)
DATA_FAULTS = {
    "missing folder": (lambda d: shutil.rmtree(d), "no such folder"),
    "a file, not a folder": (lambda d: (shutil.rmtree(d), d.write_text("x")), "not a folder"),
    "empty folder": (lambda d: [p.unlink() for p in d.iterdir()], "no questions_<split>.csv file"),
    "articles.csv is a folder": (lambda d: ((d / "articles.csv").unlink(), (d / "articles.csv").mkdir()),
                                 "articles.csv: is a folder, not a CSV file"),
    "articles.csv is a FIFO": (lambda d: ((d / "articles.csv").unlink(), _fifo(d / "articles.csv")),
                               "articles.csv: is a special file"),
    "questions_test.csv is a folder": (lambda d: ((d / "questions_test.csv").unlink(),
                                                  (d / "questions_test.csv").mkdir()),
                                       "questions_test.csv: is a folder"),
    "questions_test.csv is a FIFO": (lambda d: ((d / "questions_test.csv").unlink(), _fifo(d / "questions_test.csv")),
                                     "questions_test.csv: is a special file"),
    "questions_test.csv is a dangling link": (
        lambda d: ((d / "questions_test.csv").unlink(), (d / "questions_test.csv").symlink_to(d / "gone.csv")),
        "questions_test.csv: is a broken link"),
    "questions: bad quoting": (lambda d: (d / "questions_test.csv").write_text(
        'id,question,article_ids\n10,"Combien ?,2\n11,x,3\n'), "not a readable CSV"),
    "questions: binary garbage": (lambda d: (d / "questions_test.csv").write_bytes(BINARY), "not UTF-8 text"),
    "questions: Latin-1": (lambda d: (d / "questions_test.csv").write_bytes(
        "id,question,article_ids\n10,Où est la caution ?,2\n".encode("latin-1")),
                           "not UTF-8 text (bad byte on line 2)"),
    "questions: wrong columns": (lambda d: (d / "questions_test.csv").write_text("a,b,c\n1,2,3\n"),
                                 "missing column(s) id, question, article_ids"),
    "questions: empty file": (lambda d: (d / "questions_test.csv").write_bytes(b""), "the file is empty"),
    "questions: repeated ids": (lambda d: (d / "questions_test.csv").write_text(
        "id,question,article_ids\n10,a,1\n10,b,2\n"), "repeated question id(s) 10"),
    "questions: too many fields": (lambda d: (d / "questions_test.csv").write_text(
        "id,question,article_ids\n10,a,1,extra,more\n"), "more fields than the header line"),
    "articles: bad quoting": (lambda d: (d / "articles.csv").write_text('id,article\n1,"open\n2,b\n'),
                              "not a readable CSV"),
    "articles: binary garbage": (lambda d: (d / "articles.csv").write_bytes(BINARY), "not UTF-8 text"),
    "articles: wrong columns": (lambda d: (d / "articles.csv").write_text("x,y\n1,2\n"),
                                "missing column(s) id, article"),
    "articles: repeated ids": (lambda d: (d / "articles.csv").write_text("id,article\n1,a\n1,b\n"),
                               "repeated article id(s) 1"),
    "articles: header only": (lambda d: (d / "articles.csv").write_text("id,article\n"), None),
    "articles: above the size limit": (lambda d: _sparse(d / "articles.csv", sources.MAX_CSV_BYTES + 2**20),
                                       "larger than the 512 MiB limit"),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("fault", sorted(DATA_FAULTS))
def test_broken_dataset_folder(tmp_path, capsys, command, fault):
    folder = good_folder(tmp_path)
    breaker, phrase = DATA_FAULTS[fault]
    breaker(folder)
    if phrase is None:  # a corpus without articles: only searching needs one
        if command in ("run", "index"):
            one_line_failure(capsys, argv(command, str(folder), tmp_path), f"bsard_demo {command}: ",
                             "the article corpus is empty")
        else:
            assert main(argv(command, str(folder), tmp_path)) == 0
        return
    one_line_failure(capsys, argv(command, str(folder), tmp_path), f"bsard_demo {command}: ", phrase)


@pytest.mark.parametrize("command", COMMANDS)
def test_unreadable_dataset_file_simulated(tmp_path, capsys, monkeypatch, command):
    """A file whose read fails (what chmod 000 does to a non-root user; see the subprocess test
    for the real thing)."""
    folder = good_folder(tmp_path)
    real = Path.read_bytes

    def read_bytes(self):
        if self.name == "questions_test.csv":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    one_line_failure(capsys, argv(command, str(folder), tmp_path),
                     "questions_test.csv: cannot read (Permission denied)")


# -- broken run files (evaluate) --------------------------------------------------------------

RUN_FAULTS = {
    "missing file": (None, "file not found"),
    "a folder": ("dir", "is a folder, not a run file"),
    "a FIFO": ("fifo", "is not a regular file"),
    "empty": (b"", "the file is empty (0 bytes)"),
    "binary garbage": (BINARY, "this is a PNG image, not a run file"),
    "NUL bytes": (b"1 Q0 2 1 1.0 t\x00\x00\x00\n", "binary file (it contains NUL bytes)"),
    "bad quoting": (b'qid,docid,score\n10,"2,3.5\n', "expected 3 fields"),
    "wrong columns": (b"a,b,c\n10,2,3\n", "comma-separated values without a header line"),
    "CSV missing columns": (b"qid,foo,score\n10,2,3\n", "no article id column"),
    "HTML page": (b"<!DOCTYPE html><html><body>404</body></html>", "HTML web page"),
    "truncated gzip": ("gzip-cut", "gzip file is truncated"),
    "qrels instead of a run": (b"10 0 2 1\n11 0 3 1\n", "qrels file"),
}


@pytest.mark.parametrize("command", ["evaluate", "compare"])
@pytest.mark.parametrize("fault", sorted(RUN_FAULTS))
def test_broken_run_file(tmp_path, capsys, fault, command):
    import gzip

    data = str(good_folder(tmp_path))
    content, phrase = RUN_FAULTS[fault]
    run = tmp_path / "r.trec"
    if content == "dir":
        run.mkdir()
    elif content == "fifo":
        os.mkfifo(run)
    elif content == "gzip-cut":
        run.write_bytes(gzip.compress(GOOD_RUN.encode() * 50)[:-20])
    elif content is not None:
        run.write_bytes(content)
    line = one_line_failure(capsys, argv(command, data, tmp_path, run=str(run)), f"bsard_demo {command}: r.trec",
                            phrase)
    assert line.endswith("; not scored")


def test_unreadable_run_file_simulated(tmp_path, capsys, monkeypatch):
    data = str(good_folder(tmp_path))
    run = tmp_path / "r.trec"
    run.write_text(GOOD_RUN)

    def deny(path, *args, **kwargs):
        if str(path) == str(run):
            raise PermissionError(13, "Permission denied", str(path))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(run_read, "open", deny, raising=False)
    one_line_failure(capsys, argv("evaluate", data, tmp_path, run=str(run)), "cannot read", "Permission denied")


def test_run_file_with_several_problems_lists_each_then_sums_up(tmp_path, capsys):
    """The one documented exception to "one line": a run file with N problems gets N lines
    (each with its line number), then a summary line."""
    data = str(good_folder(tmp_path))
    run = tmp_path / "r.trec"
    run.write_text("10 Q0 2 1 x t\n10 Q0 1 2 nan t\n11 Q0 3 1 2.0 t\n11 Q0 3\n")
    assert main(argv("evaluate", data, tmp_path, run=str(run))) == 2
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split(": ")[0] for ln in lines[:-1]] == ["r.trec:1", "r.trec:2", "r.trec:4"]
    assert lines[-1] == "bsard_demo evaluate: unusable run file(s), not scored: r.trec (3 error(s))"


# -- output paths, options, usage -------------------------------------------------------------

def test_unwritable_outputs(tmp_path, capsys):
    data = str(good_folder(tmp_path))
    (tmp_path / "a_file").write_text("x")
    base = argv("run", data, tmp_path)[:-4]  # without --out and --depth
    for out in (tmp_path, tmp_path / "missing" / "r.trec", tmp_path / "a_file" / "r.trec"):
        one_line_failure(capsys, [*base, "--out", str(out)], "bsard_demo run: cannot write")
    run = tmp_path / "good.trec"
    run.write_text(GOOD_RUN)
    for per_query in (tmp_path / "missing" / "q.csv", tmp_path):
        try:
            code = main(["evaluate", str(run), "--data", data, "--k", "1", "--per-query", str(per_query)])
        finally:
            out, err = capsys.readouterr()
        assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith("bsard_demo evaluate: ") and ": : " not in err


@pytest.mark.parametrize("args, phrase", [
    ([], "the following arguments are required"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["evaluate"], "the following arguments are required: RUN"),
    (["evaluate", "r.trec", "--k", "ten"], "invalid int value: 'ten'"),
    (["evaluate", "r.trec", "--format", "xml"], "invalid choice: 'xml'"),
    (["data", "--bogus"], "unrecognized arguments: --bogus"),
    (["run", "--data", "sample"], "the following arguments are required: --out"),
    (["index", "--retriever", "sparse"], "invalid choice: 'sparse'"),
    (["run", "--out", "x", "--depth", "1e3"], "invalid int value"),
])
def test_usage_errors_are_one_line(capsys, args, phrase):
    one_line_failure(capsys, args, "error:", phrase, "--help")


@pytest.mark.parametrize("args, phrase", [
    (["evaluate", "{run}", "--data", "{data}", "--k", "0"], "--k takes positive integers"),
    (["evaluate", "{run}", "--data", "{data}", "--split", "dev"], "no split 'dev'"),
    (["run", "--data", "{data}", "--out", "{tmp}/o.trec", "--depth", "0"], "--depth must be at least 1"),
    (["run", "--data", "{data}", "--out", "{tmp}/o.trec", "--split", "dev", "--no-progress"], "no split 'dev'"),
    (["run", "--data", "{data}", "--out", "{tmp}/o.trec", "--tag", "two words"], "--tag must be one word"),
    (["index", "--data", "{data}", "--k1", "-1", "--no-progress"], "k1 must be >= 0"),
    (["index", "--data", "{data}", "--b", "2", "--no-progress"], "b must be between 0 and 1"),
    (["index", "--data", "{data}", "--retriever", "dense", "--encoder", "{tmp}/no-model", "--no-progress"],
     "is neither a model folder nor a Hugging Face model id"),
])
def test_bad_option_values_are_one_line(tmp_path, capsys, args, phrase):
    data = good_folder(tmp_path)
    run = tmp_path / "good.trec"
    run.write_text(GOOD_RUN)
    args = [a.format(run=run, data=data, tmp=tmp_path) for a in args]
    one_line_failure(capsys, [*args, "--cache-dir", str(tmp_path / "c")] if args[0] != "evaluate" else args, phrase)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_path_with_a_line_break_stays_one_line(tmp_path, capsys, command):
    one_line_failure(capsys, argv(command, str(tmp_path / "evil\nsecond line"), tmp_path),
                     "no such folder")


def test_one_line_helper():
    assert one_line("a\n  b\r\nc\n\n") == "a b c"


# -- hub faults (CLI side) --------------------------------------------------------------------

@pytest.mark.parametrize("command", COMMANDS)
def test_offline_hub_names_the_alternatives(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("BSARD_DATA", raising=False)
    args = [a for a in argv(command, "hub", tmp_path) if a not in ("--data", "hub")]
    one_line_failure(capsys, args, f"bsard_demo {command}: cannot download", "hub is unreachable",
                     "--data sample", "--data PATH")


@pytest.fixture
def answering_hub(monkeypatch):
    """HF_ENDPOINT on a local server that answers the reachability probe, so that the CLI goes on
    to download (substituted by each test)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                conn.close()
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("BSARD_DATA", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{srv.getsockname()[1]}")
    yield
    srv.close()


def _timeout_errors():
    import requests

    return [TimeoutError("timed out"), requests.exceptions.ReadTimeout("Read timed out. (read timeout=10)"),
            requests.exceptions.ConnectionError("Max retries exceeded\nwith url")]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("exc", _timeout_errors(), ids=lambda e: type(e).__name__)
def test_hub_timeouts_exit_2_naming_the_alternatives(tmp_path, capsys, monkeypatch, answering_hub, command, exc):
    import huggingface_hub

    def download(**kwargs):
        raise exc

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    args = [a for a in argv(command, "hub", tmp_path) if a not in ("--data", "hub")]
    one_line_failure(capsys, args, "cannot download", type(exc).__name__, "--data sample", "--data PATH")


@pytest.mark.parametrize("command", COMMANDS)
def test_partial_hub_download_exits_2(tmp_path, capsys, monkeypatch, answering_hub, command):
    import huggingface_hub

    hub = tmp_path / "hub"
    shutil.copytree(REPO / "bsard_demo" / "sample_data", hub, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    text = (hub / "questions_test.csv").read_bytes()
    (hub / "questions_test.csv").write_bytes(text[: text.rindex(b",")])  # the last row loses its article ids
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda *, filename, **kw: str(hub / filename))
    args = [a for a in argv(command, "hub", tmp_path) if a not in ("--data", "hub")]
    one_line_failure(capsys, args, "damaged or partly downloaded", "have no relevant article", "--data sample",
                     "--data PATH")


# -- the real interpreter ---------------------------------------------------------------------

def _env(**extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), **extra}
    env.pop("BSARD_DATA", None)
    return env


# One interpreter imports what ``python -m bsard_demo`` imports, then forks a process a case: each runs the real
# entry point (bsard_demo/__main__.py through runpy, as ``-m`` does) with its own argv, its stdout and stderr in
# files of its own, and ends through the interpreter's own exit (``sys.exit(main())``: its code, its flushes).
# One import for all the cases instead of one a case (~1 CPU s each; tests/test_cache_faults.py's race forks too).
FORKER = r"""
import json, os, runpy, sys
import bsard_demo.cli.main  # bsard_demo/__main__.py's import

folder, cases = sys.argv[1], json.loads(sys.argv[2])
pids = []
for i, args in enumerate(cases):
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # a case: its own output files, then the command, which exits (sys.exit in __main__.py)
        for fd, name in ((1, "out"), (2, "err")):
            os.dup2(os.open(os.path.join(folder, f"{name}-{i}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        sys.argv = ["bsard_demo", *args]
        runpy.run_module("bsard_demo", run_name="__main__", alter_sys=True)
        raise SystemExit("bsard_demo's __main__ returned instead of exiting")
    pids.append(pid)
print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]))
"""


def _run_forked(cases: dict[str, list[str]], env: dict, folder: Path,
                prefix: list[str] = ()) -> dict[str, tuple[int, str, str]]:
    """``python -m bsard_demo *args`` of each case, each in its own process, all at once (:data:`FORKER`;
    ``prefix`` runs them as another user, who must be able to write ``folder``): ``{case: (code, out, err)}``."""
    proc = subprocess.run([*prefix, sys.executable, "-c", FORKER, str(folder), json.dumps(list(cases.values()))],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    # the imports a fresh ``python -m bsard_demo`` makes print nothing (a warning there would be a second line)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    codes = json.loads(proc.stdout)
    assert len(codes) == len(cases)
    return {name: (code, (folder / f"out-{i}").read_text(), (folder / f"err-{i}").read_text())
            for i, (name, code) in enumerate(zip(cases, codes))}


def _check_all(results: dict[str, tuple[int, str, str]], phrases: dict[str, str], rc: int = 2) -> None:
    failures = []
    for name, phrase in phrases.items():
        code, out, err = results[name]
        lines = err.splitlines()
        if code != rc or len(lines) != 1 or "Traceback" in err + out or phrase not in err:
            failures.append(f"{name}: rc={code} stderr={err!r}")
    assert failures == []


def test_subprocess_subset(tmp_path):
    """One case per command through ``python -m bsard_demo``'s entry point, each in its own process, run
    concurrently: the exit code, the one stderr line and no traceback of the real interpreter (the in-process
    tests above cover every case, including these)."""
    folder = good_folder(tmp_path)
    (tmp_path / "garbage.trec").write_bytes(BINARY)
    bad_quotes = good_folder(tmp_path / "q")
    (bad_quotes / "questions_test.csv").write_text('id,question,article_ids\n10,"Combien ?,2\n')
    as_dir = good_folder(tmp_path / "d")
    (as_dir / "articles.csv").unlink()
    (as_dir / "articles.csv").mkdir()
    env = _env(BSARD_CACHE=str(tmp_path / "cache"), HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    cases = {
        "data, offline hub": (["data"], "--data sample"),
        "evaluate, garbage run": (["evaluate", str(tmp_path / "garbage.trec"), "--data", str(folder)], "PNG image"),
        "run, bad quoting": (["run", "--data", str(bad_quotes), "--out", str(tmp_path / "o.trec")],
                             "not a readable CSV"),
        "index, articles.csv a folder": (["index", "--data", str(as_dir)], "is a folder, not a CSV file"),
    }
    (tmp_path / "outs").mkdir()
    results = _run_forked({name: args for name, (args, _) in cases.items()}, env, tmp_path / "outs")
    _check_all(results, {name: phrase for name, (_, phrase) in cases.items()})


def _setpriv() -> list[str]:
    """The command prefix that runs a process as user nobody, once that user is known to be able
    to run this interpreter on this checkout (the same way :func:`_run_forked` does: its cwd, its
    ``PYTHONPATH``, the venv's packages). A checkout or venv under a private (0700) folder, as in
    a clone under ``mktemp -d``, is out of nobody's reach: the test is then skipped, saying so."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run a check as user nobody")
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    # found and opened, not imported (0.05 CPU s, not 1.2): what a private folder on the way would stop
    reach = ("import importlib.util as u\n"
             "for m in ('pandas', 'bsard_demo.cli.main'):\n    open(u.find_spec(m).origin, 'rb').close()")
    probe = subprocess.run([*prefix, sys.executable, "-c", reach], cwd=REPO,
                           env=_env(HOME=tempfile.gettempdir()), capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"user nobody cannot run {sys.executable} on the checkout {REPO} (a private folder on the "
                    f"way?): {probe.stderr.strip()[-200:]!r}")
    return prefix


def test_really_unreadable_files_as_nobody():
    """chmod 000 does not stop root, so these run as user nobody (uid 65534): an unreadable
    questions file, an unreadable run file, a folder it may not list, a cache folder it may not
    enter (exit 0 with a note: the index is rebuilt in memory)."""
    prefix = _setpriv()
    root = Path(tempfile.mkdtemp(prefix="bsard-nobody-"))
    try:
        root.chmod(0o755)
        folder = good_folder(root)
        for p in (folder, *folder.iterdir()):
            p.chmod(0o755 if p.is_dir() else 0o644)
        (folder / "questions_test.csv").chmod(0)
        readable = good_folder(root / "ok")
        for p in (root / "ok", readable, *readable.iterdir()):
            p.chmod(0o755 if p.is_dir() else 0o644)
        run = root / "r.trec"
        run.write_text(GOOD_RUN)
        run.chmod(0)
        locked = root / "locked"
        locked.mkdir(mode=0)
        locked.chmod(0)
        env = _env(HOME=str(root), HF_HUB_OFFLINE="1")
        cases = {
            "data, unreadable questions": (["data", "--data", str(folder)], "cannot read (Permission denied)"),
            "run, unreadable questions": (["run", "--data", str(folder), "--out", "-", "--no-progress"],
                                          "cannot read (Permission denied)"),
            "evaluate, unreadable run": (["evaluate", str(run), "--data", str(readable), "--k", "1"],
                                         "Permission denied; not scored"),
            "data, unlistable folder": (["data", "--data", str(locked)], "cannot list the folder (Permission denied)"),
        }
        index = ["index", "--data", str(readable), "--cache-dir", str(locked / "cache"), "--no-progress"]
        outs = root / "outs"  # the cases' output files, written by nobody
        outs.mkdir()
        os.chown(outs, 65534, 65534)
        results = _run_forked({**{name: args for name, (args, _) in cases.items()}, "index, locked cache": index},
                              env, outs, prefix)
        _check_all(results, {name: phrase for name, (_, phrase) in cases.items()})
        code, _, err = results["index, locked cache"]
        assert code == 0 and "Traceback" not in err, err
        assert "note: could not save the BM25 index to the cache (Permission denied)" in err
    finally:
        for p in root.rglob("*"):
            if not p.is_symlink():
                p.chmod(stat.S_IRWXU)
        shutil.rmtree(root, ignore_errors=True)
