"""Checks of a scenario's data files made when the scenario is validated, before anything is
loaded: the files are there (else the message names `hierfl data fetch`), their headers are
well formed and the set can be split over the topology's clients. What only reading the whole
file shows (a label out of range, a truncated gzip stream, a LEAF user without samples) is
reported the same way when the data is loaded (`hierfl validate` loads it)."""
from __future__ import annotations

import os

from ..config.schema import DataSpec
from .files import DataFileError, fetch_hint

LABELLED = ("synthetic", "synthetic_iid", "digits", "mnist", "fashion_mnist", "cifar10",
            "cifar100", "leaf")
# the keys of data: each built-in set reads (besides name); another key given is a problem, not
# silently ignored (options: is the registry's, checked there)
READS = {"synthetic": ("alpha", "beta", "dim", "classes", "samples", "max_samples",
                       "test_fraction"),
         "synthetic_iid": ("dim", "classes", "samples", "max_samples", "test_fraction"),
         "digits": ("partition", "test_fraction"), "npz": ("path", "test_fraction"),
         "mnist": ("root", "partition"), "fashion_mnist": ("root", "partition"),
         "cifar10": ("root", "partition"), "cifar100": ("root", "partition", "label"),
         "leaf": ("path", "users")}
# the keys of data.partition each kind reads (besides kind): `partition: {alpha: 0.1}` without
# kind: dirichlet is an iid split, which a user who wrote alpha did not mean
PARTITION_READS = {"iid": (), "dirichlet": ("alpha",), "shards": ("shards_per_client",)}
ROOT_SETS = ("mnist", "fashion_mnist", "cifar10", "cifar100")
# (training rows, features, classes) of the official files (resource estimate before loading)
OFFICIAL = {"mnist": (60_000, 784, 10), "fashion_mnist": (60_000, 784, 10),
            "cifar10": (50_000, 3072, 10), "cifar100": (50_000, 3072, 100)}

Found = list[tuple[str, object, str]]


def shape(data: DataSpec, n_clients: int) -> tuple[float, int, int] | None:
    """(training rows per client, features, classes) of an image set's official files."""
    if data.name not in OFFICIAL:
        return None
    rows, dim, classes = OFFICIAL[data.name]
    if data.name == "cifar100" and data.label == "coarse":
        classes = 20
    return rows / max(n_clients, 1), dim, classes


def key_problems(name: str, given: object) -> Found:
    """(key, value, message) for each key of the raw `data:` mapping `given` that the built-in
    set `name` does not read (cifar10 with label:, digits with root:, ...)."""
    reads = READS.get(name)
    if reads is None or not isinstance(given, dict):
        return []
    found: Found = []
    for key, value in given.items():
        if key in ("name", "options") or key in reads or value is None:
            continue
        other = {"path": "root", "root": "path"}.get(str(key))
        if other in reads:
            what = "file" if name == "npz" else "folder"
            msg = f"{name} reads the {what} {other}:, not {key}:"
        else:
            users = [n for n, keys in READS.items() if key in keys]
            msg = (f"{name} does not use {key}:" + (f" (it is for {', '.join(users)})"
                   if users else "") + f"; {name} reads {', '.join(reads)}")
        found.append((f"data.{key}", value, msg))
    if "partition" in reads:
        found += _partition_problems(given.get("partition"))
    return found


def _partition_problems(part: object) -> Found:
    """(key, value, message) for each key of a raw `partition:` mapping that its kind does not
    read (alpha with iid or shards, shards_per_client with iid or dirichlet); unknown keys and
    kinds are the schema's to report."""
    kind = part.get("kind", "iid") if isinstance(part, dict) else None
    reads = PARTITION_READS.get(kind) if isinstance(kind, str) else None
    if reads is None:
        return []
    found: Found = []
    for key, value in part.items():
        users = [k for k, keys in PARTITION_READS.items() if key in keys]
        if key == "kind" or key in reads or value is None or not users:
            continue
        which = f"kind: {kind}" if "kind" in part else "kind: iid (the default: no kind: given)"
        found.append((f"data.partition.{key}", value,
                      f"a partition of {which} does not use {key}: (it is for kind: "
                      f"{', '.join(users)}); give kind: {users[0]} for that split"))
    return found


def for_other_sets(name: object, given: object, names: list) -> list[str]:
    """The keys of the raw `data:` mapping `given` that the built-in set `name` does not read
    but another of `names` does: a sweep over data.name leaves them out of `name`'s points (the
    base's alpha: is for its synthetic points, not for its synthetic_iid ones)."""
    return _read_by_others(READS, name, given, names)


def for_other_kinds(name: object, part: object, kinds: list) -> list[str]:
    """The keys of the raw `partition:` mapping of the built-in set `name` that its kind does
    not read but another of `kinds` does: a sweep over data.partition.kind leaves them out of
    that kind's points (the base's alpha: is for its dirichlet points, not for its iid ones).
    None for a set that reads no partition: (a plugin's is its loader's own option)."""
    if "partition" not in READS.get(name if isinstance(name, str) else "", ()):
        return []
    kind = part.get("kind", "iid") if isinstance(part, dict) else None
    return _read_by_others(PARTITION_READS, kind, part, kinds)


def _read_by_others(table: dict, own: object, given: object, others: list) -> list[str]:
    """The keys of `given` that `table` says `own` does not read but another of `others`
    does ([] when `own` is not in the table or `given` not a mapping)."""
    reads = table.get(own) if isinstance(own, str) else None
    if reads is None or not isinstance(given, dict):
        return []
    other = {k for n in others if isinstance(n, str) and n != own for k in table.get(n, ())}
    return [k for k in given if k not in reads and k in other]


def _image_problems(data: DataSpec, base_dir: str, n_clients: int | None) -> Found:
    from .images import client_problem, source

    if data.path is not None:
        return []                   # key_problems says so
    if not data.root:
        return [("data.root", None, f"{data.name} needs root: (the folder of its files); "
                 f"{fetch_hint(data.name, 'DIR')}")]
    try:
        src = source(data, os.path.join(base_dir, data.root))
    except DataFileError as exc:
        return [("data.root", data.root, f"{exc.path}: {exc.message}")]
    bad = client_problem(data, src.n_train, n_clients) if n_clients is not None else None
    return [bad] if bad else []


def _leaf_problems(data: DataSpec, base_dir: str, n_clients: int | None) -> Found:
    from .leaf import split_files

    found: Found = []
    if not data.path:
        return found + [("data.path", None, "leaf needs path: (the folder holding LEAF's "
                         "train/ and test/ JSON files)")]
    if n_clients is not None and data.users is not None and data.users < n_clients:
        found.append(("data.users", data.users, f"must be >= the topology's {n_clients} "
                      "clients (every client holds at least one LEAF user)"))
    try:
        for split in ("train", "test"):
            split_files(os.path.join(base_dir, data.path), split)
    except DataFileError as exc:
        found.append(("data.path", data.path, f"{exc.path}: {exc.message}"))
    return found


def data_problems(data: DataSpec, base_dir: str, n_clients: int | None) -> Found:
    """(key, value, message) for every problem with the files of `data` (paths relative to
    base_dir) that shows without loading them."""
    if data.name in ROOT_SETS:
        return _image_problems(data, base_dir, n_clients)
    if data.name == "leaf":
        return _leaf_problems(data, base_dir, n_clients)
    return []
