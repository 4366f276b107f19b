"""``burnqed artifacts``: push a run's artifacts to the DVC remote, or pull them so that
``snakemake -n`` on this machine has nothing to do.

``push`` tracks data/, models/ and results/ with DVC (one ``.dvc`` file each), records Snakemake's
view of them in ``snakemake-state.json`` and uploads; commit the ``.dvc`` files, the state file and
``.gitignore``.  ``pull`` downloads them (naming any file the remote lacks) and restores Snakemake's
view; ``restore`` does only the second half, after a ``dvc pull`` by hand.

Example::

    burnqed artifacts push --remote store
    burnqed artifacts pull
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "artifacts",
        help="dvc push/pull of data/, models/, results/ with no Snakemake reruns after the pull",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("action", choices=("push", "pull", "restore"))
    p.add_argument("--remote", default=None, help="DVC remote name (default: the default remote)")
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from burnqed.artifacts.sync import ArtifactError, pull, push, restore

    repo = Path.cwd()
    try:
        if args.action == "push":
            push(repo, remote=args.remote)
        elif args.action == "pull":
            pull(repo, remote=args.remote)
        else:
            restore(repo)
    except ArtifactError as e:
        logging.getLogger(__name__).debug("artifacts %s failed", args.action, exc_info=True)
        print(f"burnqed artifacts {args.action}: {e}", file=sys.stderr)
        return 1
    return 0
