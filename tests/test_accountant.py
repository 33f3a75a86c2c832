"""The privacy accountant (hierfl/privacy/accountant.py) against dp-accounting computed directly
for the same (q, z, steps, delta), the Gaussian mechanism's RDP by hand, the exact Gaussian
(epsilon, delta) curve as a lower bound, and noise_for's round trip."""
from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
from dp_accounting import dp_event as ev
from dp_accounting.rdp import rdp_privacy_accountant as rdp
from scipy.stats import norm

from hierfl.privacy.accountant import TOL, Accountant, noise_for

ORDERS = np.array(rdp.DEFAULT_RDP_ORDERS)


def _library(event: ev.DpEvent, steps: int, delta: float, relation=rdp.NeighborRel
             .ADD_OR_REMOVE_ONE) -> float:
    return rdp.RdpAccountant(neighboring_relation=relation).compose(event, steps) \
        .get_epsilon(delta)


@pytest.mark.parametrize("q,z,steps,delta", [
    (0.1, 1.1, 100, 1e-5), (0.01, 0.8, 1000, 1e-6), (0.25, 2.0, 30, 1e-5),
    (0.5, 0.6, 7, 1e-3), (0.02, 4.0, 500, 1e-5)])
def test_poisson_equals_library(q, z, steps, delta):
    a = Accountant(delta, z)
    a.step(q, steps)
    want = _library(ev.PoissonSampledDpEvent(q, ev.GaussianDpEvent(z)), steps, delta)
    assert a.epsilon() == want
    assert 0 < want < math.inf


@pytest.mark.parametrize("n,m,z,steps", [(60, 6, 1.5, 40), (200, 10, 3.0, 100)])
def test_fixed_size_equals_library_without_replacement(n, m, z, steps):
    """replace_one, q = m / n: the library's sampling-without-replacement event of the same
    sizes, its Gaussian at z / 2 (a sum of terms clipped to C moves by 2C when one is
    replaced)."""
    a = Accountant(1e-5, z, "replace_one")
    a.step(m / n, steps)
    want = _library(ev.SampledWithoutReplacementDpEvent(n, m, ev.GaussianDpEvent(z / 2)), steps,
                    1e-5, rdp.NeighborRel.REPLACE_ONE)
    assert a.epsilon() == want


@pytest.mark.parametrize("relation,sens", [("add_remove", 1.0), ("replace_one", 2.0)])
def test_q_one_is_the_gaussian_mechanism(relation, sens):
    """q = 1: RDP alpha sens^2 / (2 z^2) per step (sensitivity C, or 2C under replace-one),
    converted at the library's orders."""
    z, steps, delta = 1.7, 25, 1e-5
    a = Accountant(delta, z, relation)
    a.step(1.0, steps)
    want = rdp.compute_epsilon(ORDERS, steps * ORDERS * sens ** 2 / (2 * z ** 2), delta)[0]
    assert a.epsilon() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("z", [0.8, 2.0, 5.0])
def test_one_gaussian_bounds_the_exact_curve(z):
    """One Gaussian release (sensitivity 1, std z): the RDP epsilon is an upper bound, so the
    exact delta at it (Balle & Wang 2018) is at most the asked delta, and not far below."""
    delta = 1e-5
    a = Accountant(delta, z)
    a.step(1.0)
    e = a.epsilon()
    exact = norm.cdf(1 / (2 * z) - e * z) - math.exp(e) * norm.cdf(-1 / (2 * z) - e * z)
    assert delta / 100 < exact <= delta


def test_incremental_equals_one_shot():
    a, b = Accountant(1e-5, 1.1), Accountant(1e-5, 1.1)
    for _ in range(50):
        a.step(0.1)
        a.epsilon()                                         # a cached value between steps
    for _ in range(3):
        a.step(0.3, 10)
    b.step(0.1, 50)
    b.step(0.3, 30)
    assert a.epsilon() == pytest.approx(b.epsilon(), rel=1e-12)
    direct = rdp.RdpAccountant().compose(
        ev.PoissonSampledDpEvent(0.1, ev.GaussianDpEvent(1.1)), 50).compose(
        ev.PoissonSampledDpEvent(0.3, ev.GaussianDpEvent(1.1)), 30).get_epsilon(1e-5)
    assert b.epsilon() == direct


def test_epsilon_grows_and_starts_at_zero():
    a = Accountant(1e-5, 1.0)
    assert a.epsilon() == 0.0
    a.step(0.0, 10)                                         # nobody aggregated: nothing spent
    assert a.epsilon() == 0.0
    seen = []
    for _ in range(5):
        a.step(0.2)
        seen.append(a.epsilon())
    assert all(x < y for x, y in zip(seen, seen[1:]))


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_zero_noise_is_infinite(relation):
    a = Accountant(1e-5, 0.0, relation)
    assert a.epsilon() == 0.0
    a.step(0.5)
    assert a.epsilon() == math.inf
    b = Accountant(1e-5, 0.0, relation)
    b.step(1.0)
    assert b.epsilon() == math.inf


def test_would_exceed_matches_stepping_and_changes_nothing():
    a = Accountant(1e-5, 1.0)
    a.step(0.1, 20)
    before = a.epsilon()
    b = Accountant(1e-5, 1.0)
    b.step(0.1, 21)
    nxt = b.epsilon()
    assert a.would_exceed(0.1, (before + nxt) / 2) and not a.would_exceed(0.1, nxt)
    assert a.epsilon() == before and a.state() == [[0.1, 20]]


def test_state_round_trip_is_exact():
    a = Accountant(1e-5, 0.9)
    for q in [0.1, 0.1, 0.2, 1.0, 0.05]:
        a.step(q)
    saved = json.loads(json.dumps(a.state()))
    b = Accountant(1e-5, 0.9)
    b.step(0.7)                                             # replaced by the load
    b.load(saved)
    assert b.epsilon() == a.epsilon()
    a.step(0.3)
    b.step(0.3)
    assert b.epsilon() == a.epsilon()
    assert b.state() == a.state()


@pytest.mark.parametrize("target,plan,relation", [
    (1.0, [(0.1, 100)], "add_remove"),
    (8.0, [(0.01, 1000)], "add_remove"),
    (2.0, [(0.1, 50), (0.2, 20)], "add_remove"),
    (3.0, [(1.0, 20)], "replace_one"),
])
def test_noise_for_round_trips(target, plan, relation):
    """epsilon at the returned z is within the target, and z - TOL passes it."""
    z = noise_for(target, 1e-5, plan, relation)

    def eps(zz: float) -> float:
        a = Accountant(1e-5, zz, relation)
        for q, c in plan:
            a.step(q, c)
        return a.epsilon()

    assert eps(z) <= target < eps(z - TOL)
    assert eps(z) == pytest.approx(target, rel=1e-3)


def test_noise_for_nothing_released():
    assert noise_for(1.0, 1e-5, []) == 0.0
    assert noise_for(1.0, 1e-5, [(0.0, 10), (0.5, 0)]) == 0.0


def test_library_warnings_silenced(capfd, caplog):
    """q 0.1, z 1 makes the library warn "failed to converge" at the smallest orders (checked
    below, so that the test keeps testing something); our calls print nothing, and leave absl's
    level as they found it."""
    log = logging.getLogger("absl")
    level = log.level
    a = Accountant(1e-5, 1.0)
    a.step(0.1)
    a.epsilon()
    noise_for(5.0, 1e-5, [(0.1, 10)])
    assert "failed to converge" not in capfd.readouterr().err + caplog.text
    assert log.level == level
    with caplog.at_level(logging.WARNING, logger="absl"):
        rdp.RdpAccountant().compose(ev.PoissonSampledDpEvent(0.1, ev.GaussianDpEvent(1.0)))
    assert "failed to converge" in capfd.readouterr().err + caplog.text


def test_refusals():
    with pytest.raises(ValueError):
        Accountant(0.0, 1.0)
    with pytest.raises(ValueError):
        Accountant(1e-5, -1.0)
    with pytest.raises(ValueError):
        Accountant(1e-5, 1.0, "replace_all")
    with pytest.raises(ValueError):
        Accountant(1e-5, 1.0).step(1.5)
    with pytest.raises(ValueError):
        noise_for(0.0, 1e-5, [(0.1, 1)])
