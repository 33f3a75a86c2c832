"""Privacy accounting: epsilon of the run so far for its delta (docs/privacy.md).

Google's `dp-accounting` RDP accountant (Mironov 2017; Mironov, Talwar, Zhang 2019 for the
Poisson-subsampled Gaussian): maintained by Google, needs no torch, and is the accountant of
DP-FedAvg and TF Privacy, so our epsilons compare with theirs. RDP composes by adding a vector
per event, which is what makes one step per round cheap; its epsilon is an upper bound, a little
looser than a PLD accountant's (dp-accounting's PLD would be the tighter option, at a cost per
round that grows with the composition).

Each round is a subsampled Gaussian event of rate q (q = 1: the plain Gaussian). Under which
neighbouring relation (`relation`, PrivacySpec.relation):

- add_remove (one client or sample present or absent): PoissonSampledDpEvent(q, Gaussian(z)),
  each unit in the batch independently with probability q;
- replace_one (one client's update or one sample replaced by any other): a sum of terms clipped
  to C moves by up to 2C, so the Gaussian of std z*C has multiplier z/2 relative to that
  sensitivity, and q < 1 is a batch of fixed size m = q n drawn without replacement,
  SampledWithoutReplacementDpEvent(n, m, Gaussian(z/2)) (Wang, Balle, Kasiviswanathan 2019,
  Theorem 27). The event is built from q's exact binary fraction num/den as (n, m) = (den, num):
  the library's bound depends on m / n only.

The library warns (through absl) at every RDP order where a series fails to converge (it then
leaves that order out, which keeps the bound valid); those warnings are silenced inside our
calls only."""
from __future__ import annotations

import functools
import logging
from contextlib import contextmanager
from fractions import Fraction
from typing import Iterator, Literal

import numpy as np
from dp_accounting import dp_event as ev
from dp_accounting import mechanism_calibration as cal
from dp_accounting.rdp import rdp_privacy_accountant as rdp

Relation = Literal["add_remove", "replace_one"]
TOL = 1e-5          # noise_for: the returned z is within TOL of the smallest z meeting the target

_RELATION = {"add_remove": rdp.NeighborRel.ADD_OR_REMOVE_ONE,
             "replace_one": rdp.NeighborRel.REPLACE_ONE}


@contextmanager
def _quiet() -> Iterator[None]:
    """absl's logger at ERROR for the duration (its "failed to converge" warnings)."""
    log = logging.getLogger("absl")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def event(q: float, z: float, relation: Relation = "add_remove") -> ev.DpEvent:
    """One release of the Gaussian mechanism (multiplier z) on a batch of rate q."""
    if not 0 <= q <= 1:
        raise ValueError(f"sampling rate must be in [0, 1], not {q}")
    if q == 0:
        return ev.NoOpDpEvent()
    if z == 0:
        return ev.NonPrivateDpEvent()
    if relation == "add_remove":
        g = ev.GaussianDpEvent(z)
        return g if q == 1 else ev.PoissonSampledDpEvent(q, g)
    if relation == "replace_one":
        g = ev.GaussianDpEvent(z / 2)
        if q == 1:
            return g
        m, n = Fraction(q).as_integer_ratio()
        return ev.SampledWithoutReplacementDpEvent(n, m, g)
    raise ValueError(f"relation must be add_remove or replace_one, not {relation!r}")


def _fresh(relation: Relation) -> rdp.RdpAccountant:
    return rdp.RdpAccountant(neighboring_relation=_RELATION[relation])


@functools.lru_cache(maxsize=4096)
def _event_rdp(q: float, z: float, relation: Relation) -> np.ndarray:
    """The library's RDP vector of one event (0.02 to 0.3 s each), shared by every accountant
    of the process (the entries of a scenario, a resumed run's replay); read-only."""
    with _quiet():
        r = _fresh(relation).compose(event(q, z, relation)).rdp
    r.flags.writeable = False
    return r


class Accountant:
    """Epsilon at `delta` of a run of Gaussian mechanisms of multiplier `z`, composed step by
    step. The RDP vector of each distinct (q, z, relation) is computed once by the library and
    cached; a step adds count times it (the library's own `rdp += count * event_rdp`), and
    epsilon is the library's conversion of the sum (cached until the next step). state() is the
    steps in order and load() replays them, so a resumed run's epsilons are the uninterrupted
    run's, bit for bit."""

    def __init__(self, delta: float, z: float, relation: Relation = "add_remove"):
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), not {delta}")
        if not z >= 0:
            raise ValueError(f"noise multiplier must be >= 0, not {z}")
        if relation not in _RELATION:
            raise ValueError(f"relation must be add_remove or replace_one, not {relation!r}")
        self.delta, self.z, self.relation = float(delta), float(z), relation
        self._orders = np.array(rdp.DEFAULT_RDP_ORDERS)
        self._steps: list[tuple[float, int]] = []
        self._rdp = np.zeros_like(self._orders, dtype=np.float64)
        self._eps: float | None = 0.0

    def step(self, q: float, count: int = 1) -> None:
        """Compose `count` releases at sampling rate q (q = 1: every unit takes part)."""
        q = float(q)
        if count < 0 or count != int(count):
            raise ValueError(f"count must be an integer >= 0, not {count}")
        if count == 0:
            return
        self._rdp += int(count) * _event_rdp(q, self.z, self.relation)
        self._steps.append((q, int(count)))
        self._eps = None

    def _epsilon(self, r: np.ndarray) -> float:
        if not r.any():
            return 0.0
        with _quiet():
            return float(rdp.compute_epsilon(self._orders, r, self.delta)[0])

    def epsilon(self) -> float:
        """Epsilon spent so far at delta: 0 before any step, inf once z = 0 released anything."""
        if self._eps is None:
            self._eps = self._epsilon(self._rdp)
        return self._eps

    def would_exceed(self, q: float, target: float, count: int = 1) -> bool:
        """Whether `count` more releases at rate q would take epsilon past `target`."""
        r = _event_rdp(float(q), self.z, self.relation)
        return self._epsilon(self._rdp + int(count) * r) > target

    def state(self) -> list[list]:
        """The steps so far, [[q, count], ...] in order (JSON-able)."""
        return [[q, c] for q, c in self._steps]

    def load(self, state: list) -> None:
        """Replace the steps by `state`'s, replayed in order."""
        self._steps, self._rdp = [], np.zeros_like(self._orders, dtype=np.float64)
        self._eps = 0.0
        for q, c in state:
            self.step(q, c)


def noise_for(target_epsilon: float, delta: float, plan: list[tuple[float, int]],
              relation: Relation = "add_remove", tol: float = TOL) -> float:
    """The smallest noise multiplier z (within `tol`, absolute) at which the releases of `plan`,
    [(q, count), ...], end at epsilon <= target_epsilon for delta: the library's
    calibrate_dp_mechanism (Brent's method, then a bisection if needed, guaranteeing
    epsilon(z) <= target and |z - z*| <= tol)."""
    if not target_epsilon > 0:
        raise ValueError(f"target_epsilon must be > 0, not {target_epsilon}")
    steps = [(float(q), int(c)) for q, c in plan if c > 0 and q > 0]
    if not steps:
        return 0.0                      # nothing is released: no noise is needed

    def make(z: float) -> ev.DpEvent:
        return ev.ComposedDpEvent([ev.SelfComposedDpEvent(event(q, z, relation), c)
                                   for q, c in steps])

    with _quiet():
        return float(cal.calibrate_dp_mechanism(lambda: _fresh(relation), make, target_epsilon,
                                                delta, tol=tol))
