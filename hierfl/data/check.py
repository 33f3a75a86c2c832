"""A scenario's `data:` read into the named set's own spec, and the checks of its files made
when the scenario is validated, before anything is loaded. Which keys a set reads is its
spec's fields (hierfl/data/registry.py: each set declares its spec next to its code): a key
another set reads is refused naming both, a key no set reads gets the schema's "unknown key".
The files are checked by the set's declared `check` (they are there, else the message names
`hierfl data fetch`; their headers are well formed; the set can be split over the topology's
clients). What only reading the whole file shows (a label out of range, a truncated gzip
stream, a LEAF user without samples) is reported the same way when the data is loaded
(`hierfl validate` loads it)."""
from __future__ import annotations

from typing import Any

from ..config.errors import NO_VALUE, Problems
from ..config.fields import build, is_fail
from ..config.schema import DataSpec, Partitioned
from .registry import DATASETS, Found, OptionsSpec, name_problem, option_problems

# the keys of data.partition each kind reads (besides kind): `partition: {alpha: 0.1}` without
# kind: dirichlet is an iid split, which a user who wrote alpha did not mean
PARTITION_READS = {"iid": (), "dirichlet": ("alpha", "min_size"), "shards": ("shards_per_client",),
                   "classes_per_client": ("classes",),
                   "quantity_skew": ("sizes", "sigma", "alpha", "min_size")}


def _reads() -> dict[str, tuple[str, ...]]:
    """The keys each built-in set reads (besides name), from the declared specs."""
    return {n: DATASETS.reads(n) or () for n in DATASETS.builtin_names()}


def build_data(raw: object, p: Problems) -> DataSpec | None:
    """`data:` as the spec of the set it names, every problem added to `p` (None when there
    is one): the name is a known set, a key another set reads is refused naming both
    (key_problems), every other key is the set's own (typed and checked by its spec), a
    registered set's options are those its loader takes. A `data:` that is not a mapping is
    the scenario file's build to report."""
    if not isinstance(raw, dict):
        return None
    name = raw.get("name")
    if "name" not in raw:
        p.add("data.name", NO_VALUE, "required key is missing")
        return None
    if not isinstance(name, str):
        p.add("data.name", name, "expected a string")
        return None
    msg = name_problem(name)
    if msg:
        p.add("data.name", name, msg)
        return None
    found = key_problems(name, raw)
    for key, value, why in found:
        p.add(key, value, why)
    own = Problems(p.file, p.lines)
    spec = build(DATASETS.spec(name), {k: v for k, v in raw.items()
                                       if k not in _foreign(name, raw)}, own, "data")
    for prob in own.items:              # "unknown key" of data: says for which set
        msg = prob.message
        if prob.key.count(".") == 1 and msg.startswith("unknown key"):
            msg = f"unknown key for data set {name!r}{msg[len('unknown key'):]}"
        p.add(prob.key, prob.value, msg, prob.line)
    if is_fail(spec):
        return None
    for key, why in option_problems(spec):
        p.add(f"data.{key}", spec.options.get(key, spec.options), why)
    return None if found or option_problems(spec) else spec


def _foreign(name: str, given: dict) -> list[str]:
    """The keys of `given` that the built-in set `name` does not read but another set does
    (and options:): key_problems reports them (null values are left unsaid, as unset)."""
    reads = DATASETS.reads(name)
    if reads is None:
        return []
    table = _reads()
    return [k for k in given if k not in ("name", *reads) and
            (k == "options" or any(k in keys for keys in table.values()))]


def key_problems(name: str, given: object) -> Found:
    """(key, value, message) for each key of the raw `data:` mapping `given` that the built-in
    set `name` does not read but another set does (cifar10 with label:, digits with root:,
    ...), and `options:` given to a built-in set; keys no set reads are its spec's to report."""
    reads = DATASETS.reads(name)
    if reads is None or not isinstance(given, dict):
        return []
    table = _reads()
    found: Found = []
    for key in _foreign(name, given):
        value = given[key]
        if value is None:
            continue
        if key == "options":
            found.append(("data.options", value, f"{name} is a built-in data set: options: are "
                          "for data sets registered with hierfl.register_dataset"))
            continue
        users = [n for n, keys in table.items() if key in keys]
        other = {"path": "root", "root": "path"}.get(str(key))
        if other in reads:
            what = "file" if DATASETS.facts(name).one_file else "folder"
            msg = f"{name} reads the {what} {other}:, not {key}:"
        else:
            msg = (f"{name} does not use {key}: (it is for {', '.join(users)}); "
                   f"{name} reads {', '.join(reads)}")
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
    return _read_by_others(_reads(), name, given, names)


def for_other_kinds(name: object, part: object, kinds: list) -> list[str]:
    """The keys of the raw `partition:` mapping of the built-in set `name` that its kind does
    not read but another of `kinds` does: a sweep over data.partition.kind leaves them out of
    that kind's points (the base's alpha: is for its dirichlet points, not for its iid ones).
    None for a set that reads no partition: (a plugin's is its loader's own option)."""
    decl = DATASETS.declared(name) if isinstance(name, str) else None
    if decl is None or not issubclass(decl.params, Partitioned):
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


def data_problems(data: DataSpec, base_dir: str, n_clients: int | None) -> Found:
    """(key, value, message) for every problem with the files of `data` (paths relative to
    base_dir) that shows without loading them: its set's declared check."""
    if isinstance(data, OptionsSpec):
        return []
    check = DATASETS.facts(data.name).check
    return check(data, base_dir, n_clients) if check is not None else []


def file_value(data: DataSpec) -> tuple[str, Any]:
    """(key, value) of the key that names the files of `data` (its declared `files`), for a
    message about them; ("data.name", the name) for a set without files."""
    files = None if isinstance(data, OptionsSpec) else DATASETS.facts(data.name).files
    if files is None:
        return "data.name", data.name
    return f"data.{files}", getattr(data, files)
