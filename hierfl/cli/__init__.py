"""The command line (`hierfl`, `python -m hierfl`). Its rooms:

    main.py      every command's options, the dispatch, errors -> exit status (`main`)
    checks.py    the command line's own argument checks (a scenario's keys: scenario/checks.py)
    validate.py  validate: what run would build, checked without training; what it prints
    run.py       run (one scenario, then its report) and sweep (a grid of runs)
    report.py    report and compare: saved runs read again
    topology.py  topology: print and draw a topology
    inputs.py    data fetch and trace convert: outside files made into a scenario's inputs
    docs.py      docs: the generated reference pages

`main` imports only the room of the command given, so the commands that do not train import
no torch."""
from .main import main, parser

__all__ = ["main", "parser"]
