"""Byzantine clients (hierfl/robust/attacks.py): the seeded choice of attackers, each attack by
hand on small tensors with the honest rows untouched to the bit, the `attack:` keys' refusals,
and, at the aggregator, the point of robust rules: attacks that carry the mean far from the
honest updates leave the median, the trimmed mean, Krum and the geometric median close to them."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from hierfl.config.errors import Problems
from hierfl.config.fields import build
from hierfl.robust.attacks import alie_z, attackers, label_map, poison
from hierfl.robust.rules import combine
from hierfl.robust.spec import AttackSpec, RuleSpec
from hierfl.seeding import rng


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def problems(raw: dict) -> list[str]:
    p = Problems("s.yaml")
    build(AttackSpec, raw, p, "attack")
    return [f"{it.key}: {it.message}" for it in p.items]


# --------------------------------------------------------------------------- the keys
def test_attack_keys_are_refused_with_reasons():
    assert problems({"kind": "sign_flip", "fraction": 0.2, "clients": [1]}) == [
        "attack: attack 'sign_flip' needs exactly one of fraction, clients, device_class "
        "(device_class may take a fraction of its clients; got fraction and clients)"]
    assert "got clients and device_class" in problems(
        {"kind": "sign_flip", "clients": [1], "device_class": "phone"})[0]
    assert problems({"kind": "sign_flip", "fraction": 0.5, "device_class": "phone"}) == []
    assert "got neither" in problems({"kind": "ipm"})[0]
    assert problems({"kind": "none", "fraction": 0.2}) == [
        "attack.fraction: fraction applies to an attack; kind 'none' attacks no client"]
    assert problems({"kind": "sign_flip", "fraction": 0.2, "std": 2.0}) == [
        "attack.std: std applies to gaussian, not 'sign_flip'"]
    assert problems({"kind": "alie", "clients": [3, 1, 3]}) == [
        "attack.clients: names client(s) [3] more than once"]
    assert problems({"kind": "gaussian", "fraction": 1.5})[0].startswith("attack.fraction")
    assert problems({"kind": "ipm", "fraction": 0.1, "epsilon": 0})[0].startswith(
        "attack.epsilon: must be > 0")
    assert problems({"kind": "label_flip", "clients": [0], "mapping": [1, 0]}) == []


def test_attack_defaults():
    assert AttackSpec() == AttackSpec(kind="none") and not AttackSpec().active
    assert AttackSpec(kind="gaussian", fraction=0.1).std == 1.0
    assert AttackSpec(kind="scaling", fraction=0.1).factor == 10.0
    assert AttackSpec(kind="ipm", fraction=0.1).epsilon == 0.1
    assert AttackSpec(kind="alie", fraction=0.1).z is None            # z_max(n, f) per call
    assert AttackSpec(kind="label_flip", fraction=0.1).on_data
    assert not AttackSpec(kind="sign_flip", fraction=0.1).on_data


# --------------------------------------------------------------------------- who attacks
def test_attackers_are_seeded_exact_in_number_and_differ_by_seed():
    spec = AttackSpec(kind="sign_flip", fraction=0.25)
    a, b = attackers(spec, 40, seed=1), attackers(spec, 40, seed=1)
    assert a.dtype == bool and a.shape == (40,) and a.sum() == 10
    assert np.array_equal(a, b)
    assert not np.array_equal(a, attackers(spec, 40, seed=2))
    # the scenario seed's "attack" stream, not a global generator
    assert np.array_equal(np.flatnonzero(a), np.sort(rng(1, "attack").choice(40, 10, False)))


@pytest.mark.parametrize("fraction,n,count", [(0.25, 10, 3),     # 2.5: halves up
                                              (0.24, 10, 2), (0.0, 10, 0), (1.0, 7, 7),
                                              (0.1, 3, 0), (0.5, 3, 2)])
def test_attacker_count_is_fraction_times_n_rounded(fraction, n, count):
    assert attackers(AttackSpec(kind="ipm", fraction=fraction), n, 5).sum() == count


def test_attackers_by_id_and_none():
    got = attackers(AttackSpec(kind="alie", clients=[4, 0]), 6, 9)
    assert got.tolist() == [True, False, False, False, True, False]
    with pytest.raises(ValueError, match=r"\[6, 9\].*ids 0\.\.5"):
        attackers(AttackSpec(kind="alie", clients=[9, 1, 6]), 6, 9)
    assert not attackers(AttackSpec(), 6, 9).any()


# --------------------------------------------------------------------------- what they send
U = torch.tensor([[0.0, 0.0], [3.0, -4.0], [2.0, 4.0], [1.0, 1.0]])
BAD = torch.tensor([False, True, False, True])


def send(kind: str, u: torch.Tensor = U, bad: torch.Tensor = BAD, **keys) -> torch.Tensor:
    return poison(AttackSpec(kind=kind, fraction=0.5, **keys), u, bad, gen())


@pytest.mark.parametrize("kind,keys,want", [
    ("sign_flip", {}, [[-3.0, 4.0], [-1.0, -1.0]]),
    ("scaling", {}, [[30.0, -40.0], [10.0, 10.0]]),
    ("scaling", {"factor": -0.5}, [[-1.5, 2.0], [-0.5, -0.5]]),
    # honest rows [0, 0], [2, 4]: mean [1, 2], std (dividing by 2) [1, 2]
    ("alie", {"z": 1.5}, [[2.5, 5.0], [2.5, 5.0]]),
    ("ipm", {}, [[-0.1, -0.2], [-0.1, -0.2]]),
    ("ipm", {"epsilon": 10.0}, [[-10.0, -20.0], [-10.0, -20.0]]),
    ("label_flip", {}, [[3.0, -4.0], [1.0, 1.0]]),          # a data attack: sent as trained
])
def test_each_attack_by_hand(kind, keys, want):
    out = send(kind, **keys)
    np.testing.assert_allclose(out[BAD].numpy(), want, rtol=1e-6)
    assert torch.equal(out[~BAD], U[~BAD])


def test_alie_default_z_is_baruchs_z_max():
    # n = 4, f = 2: s = floor(4/2 + 1) - 2 = 1, z = Phi^-1(3/4) = 0.6744897...
    out = send("alie")
    assert out[1].tolist() == pytest.approx([1 + 0.6744897501960817, 2 + 2 * 0.6744897501960817])
    assert alie_z(10, 3) == pytest.approx(0.5244005127080407)       # s = 3: Phi^-1(0.7)
    assert alie_z(50, 12) == pytest.approx(0.5828415072712162)      # s = 14: Phi^-1(0.72)
    assert alie_z(5, 4) == pytest.approx(0.8416212335729143)        # majority: s = 1, 0.8
    assert alie_z(1, 1) == 0.0


def test_alie_and_ipm_with_every_row_attacking_use_their_own_rows():
    bad = torch.ones(4, dtype=torch.bool)
    mean, std = U.double().mean(0), U.double().std(0, correction=0)
    np.testing.assert_allclose(send("ipm", bad=bad).numpy(), [(-0.1 * mean).tolist()] * 4)
    np.testing.assert_allclose(send("alie", bad=bad, z=1.0).numpy(), [(mean + std).tolist()] * 4)


def test_gaussian_replaces_the_update_with_seeded_noise_of_the_given_std():
    u = torch.zeros(8, 20000)
    bad = torch.zeros(8, dtype=torch.bool)
    bad[[2, 5, 6]] = True
    spec = AttackSpec(kind="gaussian", fraction=0.4, std=2.5)
    out = poison(spec, u, bad, gen(3))
    assert torch.equal(out, poison(spec, u, bad, gen(3)))
    assert not torch.equal(out, poison(spec, u, bad, gen(4)))
    noise = out[bad].double()
    assert abs(noise.std().item() - 2.5) < 0.02           # 60000 draws: std error ~0.007
    assert abs(noise.mean().item()) < 0.04
    assert not out[~bad].any()
    u1 = torch.full((8, 20000), 7.0)                       # replaced, not added
    assert abs(poison(spec, u1, bad, gen(3))[bad].mean().item()) < 0.04


@pytest.mark.parametrize("kind", ["sign_flip", "gaussian", "scaling", "label_flip", "alie",
                                  "ipm", "none"])
def test_honest_rows_are_untouched_to_the_bit_and_the_input_is_not_modified(kind):
    u = torch.randn(6, 50, generator=gen(1))
    u[0, :3] = torch.tensor([-0.0, float("nan"), float("inf")])
    before = u.clone()
    bad = torch.tensor([False, True, False, False, True, False])
    spec = AttackSpec(kind=kind) if kind == "none" else AttackSpec(kind=kind, clients=[1, 4])
    out = poison(spec, u, bad, gen(2))
    assert out is not u
    assert torch.equal(out[~bad].view(torch.int32), before[~bad].view(torch.int32))
    assert torch.equal(u.view(torch.int32), before.view(torch.int32))
    changed = kind not in ("label_flip", "none")
    assert torch.equal(out[bad], u[bad]) != changed


def test_no_attacker_in_the_call_sends_everything_as_trained():
    out = send("alie", bad=torch.zeros(4, dtype=torch.bool))
    assert torch.equal(out, U)


# --------------------------------------------------------------------------- label flipping
def test_label_map():
    assert label_map(AttackSpec(kind="label_flip", fraction=0.1), 4).tolist() == [3, 2, 1, 0]
    given = AttackSpec(kind="label_flip", fraction=0.1, mapping=[1, 2, 0])
    got = label_map(given, 3)
    assert got.dtype == torch.long and got.tolist() == [1, 2, 0]
    with pytest.raises(ValueError, match="3 labels; the data has 4 classes"):
        label_map(given, 4)
    with pytest.raises(ValueError, match=r"labels \[3, 5\]"):
        label_map(AttackSpec(kind="label_flip", fraction=0.1, mapping=[5, 0, 3]), 3)


# --------------------------------------------------------------------------- at the aggregator
ROBUST = [("median", {}), ("trimmed_mean", {"beta": 0.25}), ("krum", {"f": 3}),
          ("multi_krum", {"f": 3}), ("geometric_median", {}),
          ("centered_clipping", {"tau": 2.0, "iters": 20})]


@pytest.mark.parametrize("attack", [{"kind": "scaling", "factor": -10.0},
                                    {"kind": "gaussian", "std": 10.0},
                                    {"kind": "ipm", "epsilon": 10.0},
                                    {"kind": "sign_flip"}])
def test_an_attack_that_ruins_the_mean_is_resisted_by_robust_rules(attack):
    """10 honest updates near g (|g| ~ 7, noise 0.1 an entry) and 3 attackers among 13: the
    mean lands far from g, every robust rule no farther than the farthest honest update.
    Centered clipping from v = 0 needs iterations to walk to the honest cluster (tau per
    step); with its default single step it stays within tau of the aggregator's model."""
    g = torch.randn(50, generator=gen(11))
    u = g + 0.1 * torch.randn(13, 50, generator=gen(12))
    bad = torch.zeros(13, dtype=torch.bool)
    bad[[1, 6, 11]] = True
    sent = poison(AttackSpec(clients=[1, 6, 11], **attack), u, bad, gen(13))
    w = torch.full((13,), 1 / 13, dtype=torch.float64)
    size = g.norm().item()
    far = (combine(RuleSpec(), sent, w) - g).norm().item()
    assert far > 0.4 * size, far                        # sign_flip: 7/13 g, 6/13 |g| off
    spread = (u[~bad] - g).norm(dim=1).max().item()     # the farthest honest update: ~0.1 |g|
    for kind, keys in ROBUST:
        near = (combine(RuleSpec(kind=kind, **keys), sent, w) - g).norm().item()
        assert near < spread, (kind, near, spread)
