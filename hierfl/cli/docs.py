"""`hierfl docs`: docs/scenario.md written or checked by docs_gen.py."""
from __future__ import annotations

import argparse
import os

from ..config.errors import ScenarioError
from ..config.paths import folder_problem
from ..docs_gen import main as docs_main


def cmd_docs(args: argparse.Namespace) -> int:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if args.path is None and not args.check and \
            not os.path.isfile(os.path.join(root, "pyproject.toml")):
        raise ScenarioError.one("", "--path", None, "hierfl is not run from its source "
                                "checkout, so there is no docs/scenario.md of its own to "
                                "update: give --path FILE")
    why = (folder_problem(os.path.dirname(os.path.abspath(args.path)))
           if args.path is not None and not args.check else None)
    if why:                     # a file where the reference's folder goes
        raise ScenarioError.one("", "--path", args.path, why)
    return docs_main(check=args.check, path=args.path)
