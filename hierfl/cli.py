"""hierfl command line: run, validate, report."""
from __future__ import annotations

import argparse
import os
import sys

from .scenario.errors import ScenarioError

EXIT_BAD_INPUT = 2


def _print_problems(exc: ScenarioError) -> None:
    n = len(exc.problems)
    print(f"error: {n} problem{'s' if n != 1 else ''} in the input:", file=sys.stderr)
    for p in exc.problems:
        print(f"  {p}", file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    from .run import build_world
    from .scenario.load import load

    sc, topo_spec = load(args.scenario)
    world = build_world(sc, topo_spec)
    t = world.topo
    print(f"scenario {sc.name!r} ({args.scenario}) is valid")
    print(f"  topology: 1 cloud, {t.n_edges} edges, {t.n_clients} clients "
          f"(client speed {t.client_flops.min():.3g}..{t.client_flops.max():.3g} FLOP/s)")
    c = world.data.counts
    print(f"  data: {sc.data.name}, {int(c.sum())} training rows "
          f"({c.min()}..{c.max()} per client), {len(world.data.x_test)} test rows, "
          f"dim {world.data.dim}")
    print(f"  model: {sc.model.name}, {world.model.n_params} parameters")
    print(f"  rounds: {sc.train.rounds}, clients per round: {sc.train.clients_per_round}")
    for e in sc.algorithms:
        print(f"  algorithm {e.label}: {e.name} {e.params}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .report.markdown import write_report
    from .run import run_scenario
    from .scenario.load import load

    sc, topo_spec = load(args.scenario, seed=args.seed, rounds=args.rounds, out=args.out)
    if args.threads:
        import dataclasses
        ex = dataclasses.replace(sc.train.executor, threads=args.threads)
        sc = dataclasses.replace(sc, train=dataclasses.replace(sc.train, executor=ex))
    os.makedirs(sc.output, exist_ok=True)
    print(f"running {sc.name}: {len(sc.algorithms)} algorithm(s), {sc.train.rounds} rounds "
          f"-> {sc.output}", file=sys.stderr)
    run_scenario(sc, topo_spec, progress=not args.quiet)
    path = write_report(sc.output, sc.name, sc.report.target_accuracy)
    print(f"report: {path}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report.markdown import write_report

    if not os.path.isdir(args.out):
        raise ScenarioError.one("", "OUT", args.out, "no such folder")
    try:
        print(f"report: {write_report(args.out, os.path.basename(args.out.rstrip('/')), args.target)}")
    except FileNotFoundError as exc:
        raise ScenarioError.one("", "OUT", args.out, str(exc)) from None
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hierfl", description="Hierarchical federated learning "
                                 "simulator (simpy timing + torch training)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="simulate every algorithm of a scenario and write a report")
    r.add_argument("scenario")
    r.add_argument("--out", help="output folder (default: the scenario's output:)")
    r.add_argument("--seed", type=int, help="override the scenario seed")
    r.add_argument("--rounds", type=int, help="override train.rounds")
    r.add_argument("--threads", type=int, help="torch intra-op threads")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.set_defaults(fn=cmd_run)
    v = sub.add_parser("validate", help="check a scenario and its topology, print a summary")
    v.add_argument("scenario")
    v.set_defaults(fn=cmd_validate)
    rp = sub.add_parser("report", help="regenerate the report of a finished run")
    rp.add_argument("out")
    rp.add_argument("--target", type=float, help="target accuracy of the tables")
    rp.set_defaults(fn=cmd_report)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except ScenarioError as exc:
        _print_problems(exc)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted: metrics written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
