"""The shared kit of every ``tokenforge`` command and seed script: one parser
class, one runner, the exit statuses.

:class:`ArgumentParser` accepts both spellings of every multi-word option
(``--vocab-size`` and ``--vocab_size``); :func:`run_command` turns every user
error into one line on stderr and a documented exit status (:data:`EXIT_CODES`),
and a closed pipe (``| head``) into a quiet end; :func:`check_inputs`,
:func:`read_utf8` and :func:`scheduler_arg` are the small rules several
commands share. The family subcommands (``cli/lz78.py``, ``cli/grow.py``,
``cli/mixedgram.py``) and ``cli/main.py`` import it; it imports only the
foundations (:mod:`tokenforge.errors`), so no command module imports another
one to get these.

Not handled: abbreviations of an option in its other spelling (``--vocab_s``);
errors that are bugs (anything not listed in :data:`EXIT_CODES`) keep their
traceback, so they can be reported.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, NoReturn

from ..errors import TokenforgeError

# ---------------------------------------------------------------------------
# one parser class and one error handler for every command and script
# ---------------------------------------------------------------------------
EXIT_OK = 0
EXIT_ERROR = 1  # bad input or settings: a TokenforgeError (bad file, bad value, refused sync, ...), bad text
EXIT_USAGE = 2  # the command line itself (argparse: unknown option, missing argument, bad number)
EXIT_OS = 3  # the system refused: no such file, permission denied, read-only file system, disk full
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_BROKEN_PIPE = 141  # the reader of our output went away (128 + SIGPIPE); nothing is printed

#: what ``tokenforge --help`` and the README say
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "error in the input or settings (bad file, bad value, refused sync); one line on stderr",
    EXIT_USAGE: "bad command line (unknown option, missing argument)",
    EXIT_OS: "the system refused (no such file, permission denied, read-only, disk full); one line on stderr",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C); nothing half-written is left",
    EXIT_BROKEN_PIPE: "the output pipe was closed (e.g. | head); nothing printed",
}


def exit_codes_epilog() -> str:
    lines = ["options with several words take - or _ alike (--vocab-size = --vocab_size).", "", "exit status:"]
    lines += [f"  {code:<4} {text}" for code, text in EXIT_CODES.items()]
    return "\n".join(lines)


class _EpilogFormatter(argparse.HelpFormatter):
    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:  # a preformatted block (the epilog)
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, accepting both spellings of every multi-word option.

    ``--vocab_size`` and ``--vocab-size`` are the same option whichever one was
    registered: before parsing, a ``--long_option`` (or ``--long-option``,
    with or without ``=value``) that this parser does not know is rewritten to
    the other spelling when that one is known. Subparsers are of this class
    too (argparse makes them of the parent's class), so every subcommand and
    every option added later gets this without registering anything twice;
    ``--help`` shows the registered spelling.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("epilog"):  # the exit-status table keeps its lines; descriptions still wrap
            kwargs.setdefault("formatter_class", _EpilogFormatter)
        super().__init__(*args, **kwargs)

    def _respell(self, arg_strings: list[str] | None) -> list[str] | None:
        if arg_strings is None:
            return None
        known = self._option_string_actions
        out = []
        rest = False
        for a in arg_strings:
            if rest or not isinstance(a, str) or not a.startswith("--") or len(a) <= 2:
                rest = rest or a == "--"
                out.append(a)
                continue
            name, eq, value = a.partition("=")
            if name not in known:
                for other in (name[:2] + name[2:].replace("_", "-"), name[:2] + name[2:].replace("-", "_")):
                    if other != name and other in known:
                        name = other
                        break
            out.append(name + eq + value)
        return out

    def error(self, message: str) -> NoReturn:
        # one line, as for every other user error (the usage block is one --help away)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        if args is None:
            args = sys.argv[1:]
        return super().parse_known_args(self._respell(list(args)), namespace)


def _os_message(e: OSError) -> str:
    what = e.strerror or str(e)
    if e.errno == errno.ENOSPC:
        what = "no space left on device (disk full)"
    elif e.errno == errno.EROFS:
        what = "read-only file system"
    names = [os.fsdecode(x) for x in (e.filename, e.filename2) if x is not None]
    return f"{what}: {' -> '.join(names)}" if names else what


def _quiet_stdout() -> None:
    # Point stdout at /dev/null so the interpreter's final flush cannot raise again.
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass


class UsageError(TokenforgeError):
    """A command line whose options contradict each other, found after parsing:
    reported as argparse's own errors are (exit status 2)."""


def run_command(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace, prog: str) -> int:
    """Run one command's function and turn every user error into one line on
    stderr and an exit status from :data:`EXIT_CODES`. ``TOKENFORGE_TRACEBACK=1``
    re-raises instead (for bug reports). A warning is one line too
    (``prog: warning: ...``), not Python's two-line form with a source line."""
    import warnings

    def one_line(
        message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
    ) -> str:
        return f"{prog}: warning: {' '.join(str(message).split())}\n"

    shown = warnings.formatwarning  # (the format only: recording warnings, as tests do, still works)
    warnings.formatwarning = one_line
    try:
        code = int(func(args) or 0)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as e:
        if os.environ.get("TOKENFORGE_TRACEBACK"):
            raise
        if isinstance(e, OSError):
            if e.errno == errno.EPIPE:
                _quiet_stdout()
                return EXIT_BROKEN_PIPE
            print(f"{prog}: error: {_os_message(e)}", file=sys.stderr)
            return EXIT_OS
        if isinstance(e, UnicodeError):
            print(f"{prog}: error: the input is not valid text ({e})", file=sys.stderr)
            return EXIT_ERROR
        if isinstance(e, MemoryError):
            print(f"{prog}: error: out of memory", file=sys.stderr)
            return EXIT_ERROR
        if isinstance(e, UsageError):
            print(f"{prog}: error: {e} (see {prog} --help)", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(e, (TokenforgeError, ValueError, TypeError)):
            msg = str(e).strip().splitlines()
            print(f"{prog}: error: {' '.join(msg) if msg else type(e).__name__}", file=sys.stderr)
            return EXIT_ERROR
        raise
    finally:
        warnings.formatwarning = shown


def check_inputs(paths: Iterable[str | os.PathLike[str]], what: str = "corpus path") -> None:
    """A named input that does not exist is the OS-class error (exit 3), whoever notices it first."""
    for p in paths:
        if not Path(p).exists():
            raise FileNotFoundError(errno.ENOENT, f"{what} does not exist", str(p))


def scheduler_arg(p: argparse.ArgumentParser, what: str) -> None:
    """``--scheduler ADDR``: run ``what`` on a Dask cluster."""
    p.add_argument(
        "--scheduler",
        metavar="ADDR",
        default=None,
        help=f"{what} on this Dask cluster (a scheduler address such as tcp://host:8786); the workers read the "
        "corpus files, at the same paths (or fsspec URLs)",
    )


def memory_args(p: argparse.ArgumentParser, what: str, spell: str = "-") -> None:
    """``--max-memory SIZE`` and ``--tmp-dir DIR`` (``spell="_"``: the seed scripts'
    ``--max_memory``/``--tmp_dir``; either spelling is accepted): every family's
    memory budget for ``what``, with one help text and one default rule
    (:func:`tokenforge.counting.memory_budget`)."""
    tmp = f"--tmp{spell}dir"
    p.add_argument(
        f"--max{spell}memory",
        default=None,
        metavar="SIZE",
        help=f"memory budget for {what} (e.g. 4GB; default: 3/4 of the available memory): counts spill to {tmp} "
        "and stay exact; what is dropped to fit (the rarest first) is recorded, and a budget too small is an error "
        "that names one that would do",
    )
    p.add_argument(tmp, default=None, metavar="DIR", help="where counts spill (default: the system's)")


def read_utf8(path: str | os.PathLike[str]) -> str:
    """A UTF-8 file's text; invalid bytes are a TokenforgeError naming the file and the byte offset."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TokenforgeError(f"{path}: not UTF-8 text at byte {e.start} ({e.reason})") from None
