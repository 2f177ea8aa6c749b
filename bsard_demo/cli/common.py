"""What every command shares: the one-line-error parser, one-line messages, the ``--data`` and
``--index`` options, and the tqdm progress callback.

Convention: an error the user can fix is one line on stderr, ``bsard_demo <command>: <message>``
(even when the message names a path holding a line break), and exit code 2.
"""
from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from .. import bundles, settings
from ..dataset import DataError
from ..sources import default_spec

#: What a user may do instead of a dataset that cannot be used, by the error's ``advice`` code
#: (:class:`bsard_demo.dataset.DataError`), as the CLI words it after the message.
ALTERNATIVES = ("use --data sample (the bundled fictional demo) or --data PATH (a folder with articles.csv and "
                "questions_<split>.csv)")
DATA_ADVICE = {
    "other_source": f"; {ALTERNATIVES}",
    "other_source_or": f" ({ALTERNATIVES.replace('use ', 'or ')})",
    "data_words": "; --data takes hub, sample or a folder with articles.csv and questions_<split>.csv",
}


class OneLineParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose usage errors are one line on stderr (exit 2),
    pointing to ``--help`` instead of printing the usage block. Subparsers inherit the class."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def one_line(text: object) -> str:
    """``text`` with its line breaks (and the blanks around them) turned into single spaces, so
    that a message naming a hostile path stays one line."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def add_data_argument(p: argparse.ArgumentParser) -> None:
    """The ``--data hub|sample|PATH`` option every subcommand shares."""
    p.add_argument("--data", default=None, metavar="hub|sample|PATH",
                   help="dataset: the Hugging Face hub (default, or $BSARD_DATA), the bundled fictional sample, "
                        "or a folder with articles.csv and questions_<split>.csv")


def data_spec(args: argparse.Namespace) -> str:
    """The dataset asked for: ``--data``, else ``$BSARD_DATA``, else the hub."""
    return args.data if args.data is not None else default_spec()


def add_index_argument(p: argparse.ArgumentParser) -> None:
    """The ``--index DIR|hf://OWNER/NAME[@REV]`` option of every command that builds retrievers
    (see :func:`activate_index`)."""
    p.add_argument("--index", default=None, metavar="DIR|hf://OWNER/NAME[@REV]",
                   help="prebuilt index bundle (made by 'index --export'), used instead of building when it matches "
                        "the data and settings; default $BSARD_INDEX; '' for none. A hub bundle is fetched with "
                        "HF_TOKEN")


def activate_index(args: argparse.Namespace, command: str, dataset) -> object | None:
    """Make the bundle of ``--index`` (else ``$BSARD_INDEX``) the process's bundle for
    ``dataset``. Every problem is one ``note:`` line on stderr and the usual cache/build path runs:
    a bundle that cannot be had, or one built for another corpus (then not used at all). Returns
    the active :class:`~bsard_demo.bundles.Bundle` or ``None``."""
    value = getattr(args, "index", None)
    if value is None:
        value = settings.current().index
    if not str(value).strip():
        bundles.deactivate()
        return None
    corpus = bundles.corpus_id(dataset.articles, dataset.name) if dataset.articles is not None else None
    bundle = bundles.activate(value, corpus=corpus, on_error=lambda m: say(command, f"note: {m}"))
    if bundle is None:
        return None
    note = bundle.corpus_note(corpus) if corpus is not None else None
    if note:
        bundles.deactivate()
        say(command, f"note: {note}")
        return None
    say(command, f"using index bundle {bundle.label}: {bundle.summary()}")
    return bundle


def say(command: str, message: str) -> None:
    """One line on stderr, even for a message naming a path that holds a line break."""
    print(one_line(f"bsard_demo {command}: {message}"), file=sys.stderr)


#: The CLI's words for a problem's hint (:data:`bsard_demo.runs.problems.HINTS`): the option, and
#: the Score page's checkbox (``bsard_demo.app.score_page.DISTANCES_LABEL``) for who uses both.
PROBLEM_HINTS = {
    "read_as_distances": "use --lower-is-better (CLI) / tick « scores = distances » under the file (Score page)",
    "read_as_similarities": "if higher scores are better, drop --lower-is-better (CLI) / untick « scores = distances » "
                            "(Score page)",
}


def trec_word(text: str) -> bool:
    """Whether ``text`` can stand as one field of a TREC line (a run's ``--tag``): not empty, and no blank
    nor line break, on which TREC lines are split."""
    return bool(text) and not any(ch.isspace() for ch in text)


def problem_line(name: str, problem, *, code: bool = True) -> str:
    """A run file's problem (:class:`bsard_demo.runs.Problem`) as one line of stderr:
    ``NAME[:LINE]: SEVERITY [CODE]: message`` with the hint in the CLI's words (:data:`PROBLEM_HINTS`);
    without ``code`` (``export-run``), no ``[CODE]``."""
    where = f":{problem.line}" if problem.line is not None else ""
    shown = f" [{problem.code}]" if code and problem.code else ""
    return one_line(f"{name}{where}: {problem.severity}{shown}: {problem.text(PROBLEM_HINTS)}")


def error_text(error: BaseException | str) -> str:
    """The CLI's words for an error: its message, then (a :class:`DataError`) its advice."""
    if isinstance(error, str):
        return error
    if not isinstance(error, DataError):
        return str(error)
    return f"{error}{DATA_ADVICE.get(getattr(error, 'advice', None) or '', '')}"


def fail(command: str, message: BaseException | str) -> int:
    """:func:`say` the message (an exception in :func:`error_text`'s words); the exit code of an
    error the user can fix (2)."""
    say(command, error_text(message))
    return 2


class TqdmProgress:
    """A :data:`~bsard_demo.retrievers.base.Progress` callback drawing one tqdm bar per message on stderr."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._bar = None
        self._message = None

    def __call__(self, done: int, total: int, message: str) -> None:
        if not self.enabled:
            return

        done = max(0, min(done, total))
        if message != self._message or self._bar is None or total != self._bar.total:
            self.close()
            # disable=None: no bar when stderr is not a terminal (logs, CI)
            self._bar = tqdm(total=total, initial=done, desc=message, file=sys.stderr, leave=False,
                             dynamic_ncols=True, disable=None)
            self._message = message
        elif done > self._bar.n:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._message = None
