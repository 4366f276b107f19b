"""The ``burnqed`` command line: every stage a Snakemake rule runs, runnable by hand.

Each stage package has a ``command`` module with ``add_parser(subparsers)`` that declares its
options and sets ``func`` (the report package's also adds ``tree``); the function loads and
validates the config (``--params`` plus ``--configfile`` overlays, exactly as the workflow does)
and calls the stage's ``run``.
Command modules import only light modules at import time, so ``burnqed --help`` is fast.
Bad input (:class:`~burnqed.config.ConfigError`, :class:`~burnqed.config.InputError`, a bad theorem
file) prints one line naming the file, key or line and exits 2; ``--debug`` shows the traceback.
Before the command runs — before anything imports torch — :func:`main` applies the instruction-set
pin (:mod:`burnqed.isa`): ``cpu_isa`` of the command's config files, else the setting a parent
process applied (``$BURNQED_CPU_ISA``), else ``avx2``.

Example::

    burnqed --help
    burnqed data --configfile config/demo.yaml
    burnqed search --theorems data/benchmarks/proplogic_test.jsonl --model models/base --out results/dbg
    burnqed eval --model models/iter_0/merged --out results/iter_0/eval.json
    burnqed compare results/*/eval.json --out results/compare.md
    burnqed replay results/iter_0/eval.json --priority oracle --out results/iter_0/replay.json
    burnqed cache stats --configfile config/demo.yaml
    burnqed doctor --configfile config/demo.yaml
    burnqed tree results/iter_0/eval --theorem KEY --out tree.html
    burnqed ledger add results/*/eval*.json
    burnqed study report studies/learning-d3/registration.yaml
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from burnqed import __version__

# Stage packages with a `command` module, in the order `--help` lists them, then other commands.
COMMANDS = ("data", "train", "ebm", "search", "eval", "replay", "report", "artifacts", "study")
COMMAND_MODULES = (
    *(f"burnqed.{name}.command" for name in COMMANDS),
    "burnqed.search.cache_command",  # burnqed cache stats|prune: the expansion cache
    "burnqed.doctor",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="burnqed",
        description="Lean 4 theorem proving by expert iteration: run one pipeline stage by hand.",
    )
    parser.add_argument("--version", action="version", version=f"burnqed {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an input error, show the traceback (default: one line naming the file/key/line)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).add_parser(sub)
    return parser


def one_line(e: BaseException) -> str:
    """An error message as one line (a quoted Lean or JSON message may span several)."""
    return " | ".join(line.strip() for line in str(e).splitlines() if line.strip())


def pin_setting(args: argparse.Namespace) -> str:
    """The instruction-set pin a command runs under: ``cpu_isa`` of its ``--params`` +
    ``--configfile`` files when it has them (read raw here; the command validates them and reports
    errors itself), else :func:`burnqed.isa.setting_from` the environment."""
    from burnqed import isa
    from burnqed.config import ConfigError, deep_merge, read_yaml

    params = None
    if getattr(args, "params", None) is not None:
        with contextlib.suppress(ConfigError, OSError):
            params = read_yaml(Path(args.params))
            for overlay in getattr(args, "configfile", None) or ():
                params = deep_merge(params, read_yaml(Path(overlay)))
    try:
        return isa.setting_from(params)
    except ValueError:  # an invalid cpu_isa: the command's validation names it
        return isa.setting_from(None)


def main(argv: Sequence[str] | None = None) -> int:
    from burnqed import isa
    from burnqed.config import ConfigError, InputError
    from burnqed.theorems import TheoremFileError

    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        isa.apply_pin(pin_setting(args))
    except isa.PinTooLate as e:
        # Only when main() is called inside a process that already runs torch (tests, a notebook):
        # the records will say the pin did not hold.
        logging.getLogger("burnqed.cli").warning("%s", e)
    try:
        return int(args.func(args) or 0)
    except ConfigError as e:
        if args.debug:
            raise
        print(f"burnqed: configuration error: {one_line(e)}", file=sys.stderr)
        return 2
    except (InputError, TheoremFileError) as e:
        # Bad input is the user's to fix: one line naming the file/key/line (SPEC §5), exit 2.
        if args.debug:
            raise
        print(f"burnqed {args.command}: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
