"""The `aggregate:` key of an algorithm entry (one rule per tier) and the `attack:` key (which
clients are Byzantine and what they send). Torch-free (`hierfl validate` reads it).

Every key a kind reads is None in the dataclass and settled by `__post_init__`: a key the kind
does not read is refused by name ("beta applies to trimmed_mean, not 'median'"), a key it needs
and has no default for is asked for, and the others take the kind's default (KEYS below), so two
specs that mean the same rule compare equal whether a default was written out or not."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..config.fields import FieldError, each, non_negative, positive, spec, unit_interval

_NEEDED = object()      # KEYS: the kind reads the key and has no default for it

# kind -> {key it reads: its default (or _NEEDED)}; the rules' equations: docs/robustness.md
RULE_KEYS: dict[str, dict[str, Any]] = {
    "mean": {},
    "median": {},
    "trimmed_mean": {"beta": 0.1},
    "krum": {"f": _NEEDED},
    "multi_krum": {"f": _NEEDED, "m": None},            # m None: n - f of the n updates
    "geometric_median": {"iters": 4, "nu": 1e-6, "tol": 1e-6},
    "centered_clipping": {"tau": _NEEDED, "iters": 1},
    "norm_bound": {"bound": _NEEDED},
}
ATTACK_KEYS: dict[str, dict[str, Any]] = {
    "none": {},
    "sign_flip": {},
    "gaussian": {"std": 1.0},
    "scaling": {"factor": 10.0},
    "label_flip": {"mapping": None},                    # None: y -> C - 1 - y
    "alie": {"z": None},                                # None: Baruch et al.'s z_max(n, f)
    "ipm": {"epsilon": 0.1},
}


def _settle(obj: Any, table: dict[str, dict[str, Any]], what: str) -> None:
    """Refuse the keys obj's kind does not read, ask for the ones it needs, fill the defaults."""
    reads = table[obj.kind]
    for key in dict.fromkeys(k for keys in table.values() for k in keys):
        if key not in reads and getattr(obj, key) is not None:
            who = [k for k, keys in table.items() if key in keys]
            raise FieldError(key, f"{key} applies to {' and '.join(who)}, not {obj.kind!r}")
    for key, default in reads.items():
        if getattr(obj, key) is None and default is _NEEDED:
            doc = type(obj).__dataclass_fields__[key].metadata["doc"].split(": ", 1)[-1]
            raise ValueError(f"{what} {obj.kind!r} needs {key} ({doc})")
        if getattr(obj, key) is None:
            object.__setattr__(obj, key, default)


def _beta(v: float) -> str | None:
    return None if 0 <= v < 0.5 else "must be in [0, 0.5) (the fraction trimmed from each end)"


@dataclass(frozen=True)
class RuleSpec:
    """How one aggregator combines its children's updates (rules.combine)."""

    kind: Literal["mean", "median", "trimmed_mean", "krum", "multi_krum", "geometric_median",
                  "centered_clipping", "norm_bound"] = spec(
        "mean", "the rule: its equation and paper in docs/robustness.md")
    beta: float | None = spec(None, "trimmed_mean: fraction of the updates trimmed from each "
                              "end of every coordinate, in [0, 0.5); default 0.1", check=_beta)
    f: int | None = spec(None, "krum, multi_krum: Byzantine updates tolerated, needs n > 2f + 2 "
                         "updates; required", check=non_negative)
    m: int | None = spec(None, "multi_krum: updates averaged, the m of best score; default "
                         "n - f", check=positive)
    iters: int | None = spec(None, "geometric_median: Weiszfeld iterations at most (default 4); "
                             "centered_clipping: clipping iterations (default 1)", check=positive)
    nu: float | None = spec(None, "geometric_median: smoothing, the least distance a weight "
                            "divides by; default 1e-6", check=positive)
    tol: float | None = spec(None, "geometric_median: stop when an iteration changes the "
                             "weighted sum of distances by at most tol times it; default 1e-6",
                             check=non_negative)
    tau: float | None = spec(None, "centered_clipping: clipping radius around the centre; "
                             "required", check=positive)
    bound: float | None = spec(None, "norm_bound: largest update norm M, a longer update is "
                               "scaled down to it; required", check=positive)

    def __post_init__(self) -> None:
        _settle(self, RULE_KEYS, "rule")

    @property
    def is_mean(self) -> bool:
        return self.kind == "mean"


@dataclass(frozen=True)
class AggregateSpec:
    """The rule of each tier: `edge` combines an edge's clients, `cloud` the cloud's children
    (a flat algorithm's one aggregation is `cloud`)."""

    cloud: RuleSpec = spec(default_factory=RuleSpec, doc="the cloud's rule")
    edge: RuleSpec = spec(default_factory=RuleSpec, doc="each edge's rule (hierarchical "
                          "algorithms)")

    @property
    def is_mean(self) -> bool:
        return self.cloud.is_mean and self.edge.is_mean


@dataclass(frozen=True)
class AttackSpec:
    """Which clients are Byzantine (`fraction` or `clients`) and what they send (attacks.py)."""

    kind: Literal["none", "sign_flip", "gaussian", "scaling", "label_flip", "alie", "ipm"] = spec(
        "none", "the attack: its equation and paper in docs/robustness.md")
    fraction: float | None = spec(None, "fraction of the clients that attack, chosen with the "
                                  "scenario seed (round(fraction * N), halves up)",
                                  check=unit_interval)
    clients: list[int] | None = spec(None, "the ids of the clients that attack (instead of "
                                     "fraction)", check=each(non_negative))
    device_class: str | None = spec(None, "the clients of this device class (the topology's "
                                    "profiles.devices name) attack: all of them, or `fraction` "
                                    "of them")
    std: float | None = spec(None, "gaussian: standard deviation of every entry of the sent "
                             "update; default 1.0", check=positive)
    factor: float | None = spec(None, "scaling: the sent update is factor times the trained "
                                "one; default 10.0")
    mapping: list[int] | None = spec(None, "label_flip: the label trained on for each true "
                                     "label (one per class); default y -> C - 1 - y",
                                     check=each(non_negative))
    z: float | None = spec(None, "alie: standard deviations from the honest mean; default "
                           "Baruch et al.'s z_max from the aggregation's n and f")
    epsilon: float | None = spec(None, "ipm: the sent update is -epsilon times the honest "
                                 "mean; default 0.1", check=positive)

    def __post_init__(self) -> None:
        given = [k for k in ("fraction", "clients", "device_class")
                 if getattr(self, k) is not None]
        if self.kind == "none" and given:
            raise FieldError(given[0], f"{given[0]} applies to an attack; kind 'none' attacks "
                             "no client")
        which = [k for k in given if k != "device_class" or "fraction" not in given]
        if self.kind != "none" and (len(which) != 1 or
                                    "clients" in given and "device_class" in given):
            raise ValueError(f"attack {self.kind!r} needs exactly one of fraction, clients, "
                             "device_class (device_class may take a fraction of its clients; "
                             f"got {' and '.join(given) or 'neither'})")
        if self.clients is not None and len(set(self.clients)) != len(self.clients):
            twice = sorted({c for c in self.clients if self.clients.count(c) > 1})
            raise FieldError("clients", f"names client(s) {twice} more than once")
        _settle(self, ATTACK_KEYS, "attack")

    @property
    def active(self) -> bool:
        return self.kind != "none"

    @property
    def on_data(self) -> bool:
        """The attack poisons the training data (labels), not the sent update."""
        return self.kind == "label_flip"


def check(spec: RuleSpec, n: int) -> str | None:
    """Why `spec` cannot combine n updates, or None. Only Krum refuses: it needs n > 2f + 2
    (each score sums n - f - 2 distances); one update or none is always combined (see
    combine). A trimmed mean never trims everything: beta < 1/2 keeps n - 2 floor(beta n) >= 1."""
    if spec.kind not in ("krum", "multi_krum") or n <= 1:
        return None
    if n <= 2 * spec.f + 2:
        return (f"{spec.kind} with f = {spec.f} needs more than 2f + 2 = {2 * spec.f + 2} "
                f"updates (Blanchard et al. 2017); this aggregator has {n}")
    if spec.kind == "multi_krum" and spec.m is not None and spec.m > n:
        return f"multi_krum averages m = {spec.m} updates; this aggregator has {n}"
    return None
