"""The ``esbridge`` command: a thin layer over the public API.

Every command reaches the engine the same way: ``--url`` or ``ESBRIDGE_URL`` for
an existing cluster, otherwise esbridge's running local node of ``--distribution``
(any running one if not given), and only when none runs, a new one started from
Maven Central artifacts.  Errors print one line that
says what to fix and exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from esbridge.cli import demo, engine, features, index, options, plugin, search, serve
from esbridge.cli import eval as eval_commands
from esbridge.errors import EsbridgeError


class Parser(argparse.ArgumentParser):
    """The parser of ``esbridge`` and of each of its commands (its sub-parsers are of this class
    too): options are taken only as spelled out (``--api`` is not ``--api-key``), and arguments it
    does not know are reported by name only, never with their values, which may be secrets.
    The parsed arguments keep the command line as given (``command_argv``), which reports
    record with the secrets among the parsed values hidden."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        given = list(sys.argv[1:] if args is None else args)
        parsed, extras = self.parse_known_args(_glued(given, _option_strings(self)), namespace)
        if extras:
            command = _command_parser(self, parsed)
            command.error(_unrecognized(extras, command))
        parsed.command_argv = given
        return parsed


#: Options whose value may begin with ``-``: an API key's id is random base64url, a user name is
#: the user's.  ``--api-key -Xy1:...`` would otherwise read as an option without its value.
_DASH_VALUES = ("--api-key", "--username")


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its sub-commands."""
    out: set[str] = set()
    for action in parser._actions:
        out.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _option_strings(sub)
    return out


def _glued(tokens: list[str], known: set[str]) -> list[str]:
    """``tokens`` with each ``--api-key V`` / ``--username V`` whose ``V`` begins with ``-`` (and is
    no option of the command line) written ``--api-key=V``, which argparse reads as the value."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "--":  # everything after is positional
            out.extend(tokens[i:])
            break
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok in _DASH_VALUES and nxt is not None and nxt.startswith("-") and nxt.split("=", 1)[0] not in known:
            out.append(f"{tok}={nxt}")
            i += 2
            continue
        out.append(tok)
        i += 1
    return out


def _command_parser(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub-)command ``parsed`` ran."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
            if chosen is not None:
                return _command_parser(chosen, parsed)
    return parser


#: How an option is spelled: ``--name-with-dashes`` (lower case) or ``-x``.
_OPTION_LIKE = re.compile(r"--[a-z][a-z0-9-]*|-[A-Za-z]")


def _unrecognized(extras: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """What argparse's "unrecognized arguments" says, without the arguments' values."""
    # only what is spelled like an option is shown: a value that begins with "-" (an API key's random
    # id, "-CLf...:C6Y...") is an argument like any other, not shown
    options = [arg.split("=", 1)[0] for arg in extras if _OPTION_LIKE.fullmatch(arg.split("=", 1)[0])]
    others = len(extras) - len(options)
    known = [opt for action in parser._actions for opt in action.option_strings]
    parts = []
    for opt in options:
        meant = [k for k in known if k.startswith(opt)]
        parts.append(f"{opt} (did you mean {' or '.join(meant)}? options are taken only spelled out in full)"
                     if meant else opt)
    if others:
        parts.append(f"{others} other argument{'s' if others > 1 else ''} (not shown: "
                     f"{'they' if others > 1 else 'it'} may hold a secret)")
    return f"unrecognized arguments: {', '.join(parts)}"


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``esbridge`` and all its commands."""
    from esbridge.version import __version__

    parser = Parser(
        prog="esbridge",
        description="Exact modern lexical scoring (BM25F, BMX, evolved) on Elasticsearch and OpenSearch.",
        epilog=options.EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"esbridge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    for commands in (engine, index, search, demo, eval_commands, features, plugin, serve):
        commands.add_commands(sub, options.connection_args, options.connect_engine)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``esbridge`` console script."""
    return run_parsed(build_parser().parse_args(argv))


class _MessageFormatter(logging.Formatter):
    """esbridge's log records as the command prints its own lines: ``esbridge: ...`` for progress,
    ``esbridge: warning: ...`` (``error:``, ...) for what needs attention."""

    def format(self, record: logging.LogRecord) -> str:
        label = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        return f"esbridge: {label}{record.getMessage()}"


@contextmanager
def messages_on_stderr(quiet: bool = False) -> Iterator[None]:
    """While a command runs, what esbridge logs is shown on standard error: its progress messages
    (``INFO``) and warnings, only the warnings with ``--quiet``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_MessageFormatter())
    logger = logging.getLogger("esbridge")
    level = logger.level
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run_parsed(args: argparse.Namespace) -> int:
    """Run a parsed command; an esbridge error becomes one line on stderr and its exit code
    (:data:`~esbridge.cli.options.EXIT_CODES`).  What esbridge logs meanwhile is shown on stderr
    (:func:`messages_on_stderr`)."""
    try:
        with messages_on_stderr(quiet=bool(getattr(args, "quiet", False))):
            return int(args.func(args))
    except EsbridgeError as err:
        print(f"esbridge: error: {err}", file=sys.stderr)
        return options.exit_code(err)
    except BrokenPipeError:
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("esbridge: interrupted", file=sys.stderr)
        return 130
    except json.JSONDecodeError as err:
        print(f"esbridge: error: input is not valid JSON: {err}", file=sys.stderr)
        return 2

