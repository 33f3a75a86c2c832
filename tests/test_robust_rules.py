"""The aggregation rules of hierfl/robust/rules.py against hand computations on small vectors
(ties, even counts, beta and Krum's f at their bounds), the geometric median against a numpy
Weiszfeld written here, `mean` against today's weighted_mean to the bit, and the order-statistic
rules' defining properties (within each coordinate's range, blind to the order of the rows).
The `aggregate:` keys' refusals and defaults are checked through the scenario loader's `build`."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hierfl.algorithms.base import weighted_mean
from hierfl.config.errors import Problems
from hierfl.config.fields import build, is_fail
from hierfl.robust.rules import check, combine, krum_scores
from hierfl.robust.spec import AggregateSpec, RuleSpec

ROBUST = ["median", "trimmed_mean", "krum", "multi_krum", "geometric_median",
          "centered_clipping", "norm_bound"]
NEEDED = {"krum": {"f": 0}, "multi_krum": {"f": 0}, "centered_clipping": {"tau": 1.0},
          "norm_bound": {"bound": 1.0}}


def rows(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def equal(c: int) -> torch.Tensor:
    return torch.full((c,), 1.0 / c, dtype=torch.float64)


def run(kind: str, x: torch.Tensor, w: torch.Tensor | None = None, **keys) -> torch.Tensor:
    return combine(RuleSpec(kind=kind, **keys), x, equal(len(x)) if w is None else w)


# --------------------------------------------------------------------------- the keys
def _build(raw: dict) -> tuple[object, list[str]]:
    p = Problems("s.yaml")
    out = build(AggregateSpec, raw, p, "aggregate")
    return out, [f"{it.key}: {it.message}" for it in p.items]


def test_keys_a_kind_does_not_read_or_needs_are_named():
    _, problems = _build({"cloud": {"kind": "median", "beta": 0.2},
                          "edge": {"kind": "krum"}})
    assert "aggregate.cloud.beta: beta applies to trimmed_mean, not 'median'" in problems
    assert any(p.startswith("aggregate.edge: rule 'krum' needs f") for p in problems)
    _, problems = _build({"cloud": {"kind": "trimmed_mean", "beta": 0.5}})
    assert problems == ["aggregate.cloud.beta: must be in [0, 0.5) (the fraction trimmed "
                        "from each end)"]
    _, problems = _build({"cloud": {"kind": "centered_clipping", "iters": 2, "bound": 1.0}})
    assert problems[0].startswith("aggregate.cloud.bound: bound applies to norm_bound")
    _, problems = _build({"cloud": {"kind": "geometric_mean"}})
    assert "did you mean 'geometric_median'" in problems[0]


def test_defaults_are_filled_so_equal_rules_compare_equal():
    spec, problems = _build({"edge": {"kind": "trimmed_mean"},
                             "cloud": {"kind": "geometric_median", "iters": 4}})
    assert not problems
    assert spec.edge == RuleSpec(kind="trimmed_mean", beta=0.1)
    assert (spec.cloud.iters, spec.cloud.nu, spec.cloud.tol) == (4, 1e-6, 1e-6)
    assert RuleSpec(kind="centered_clipping", tau=1.0).iters == 1
    assert RuleSpec(kind="multi_krum", f=1).m is None                  # n - f, at run time
    default = AggregateSpec()
    assert default.cloud.is_mean and default.edge.is_mean and default.is_mean
    assert not AggregateSpec(edge=RuleSpec(kind="median")).is_mean
    assert not is_fail(spec)


# --------------------------------------------------------------------------- mean
@pytest.mark.parametrize("c,p", [(1, 7), (5, 650), (13, 1001), (0, 4)])
def test_mean_is_todays_weighted_mean_to_the_bit(c, p):
    g = torch.Generator().manual_seed(c * 1000 + p)
    x = torch.randn(c, p, generator=g) * torch.logspace(-3, 3, p)
    w = torch.rand(c, generator=g, dtype=torch.float64) + 0.01
    w = w / w.sum()
    got, want = combine(RuleSpec(), x, w), weighted_mean(x, w)
    assert got.dtype == torch.float32
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


# --------------------------------------------------------------------------- median
def test_median_odd_even_and_ties_by_hand():
    assert run("median", rows([3.0, -1], [1, 5], [2, 2])).tolist() == [2.0, 2.0]
    # even count: the mean of the two middle values (torch.median would give the lower one)
    assert run("median", rows([1.0, 7], [2, 3], [10, -4], [3, 3])).tolist() == [2.5, 3.0]
    assert run("median", rows([1.0], [1], [5])).tolist() == [1.0]            # a tie
    assert run("median", rows([1.0], [5])).tolist() == [3.0]
    # the weights are not read: a client claiming all the weight moves nothing
    w = torch.tensor([0.98, 0.01, 0.01], dtype=torch.float64)
    assert run("median", rows([100.0], [1], [2]), w).tolist() == [2.0]


def test_median_of_an_even_count_is_the_correctly_rounded_midpoint():
    x = rows([1.0], [1.0 + 2 ** -23])            # float32 neighbours: the midpoint is between
    assert run("median", x).item() == np.float32(np.mean([1.0, 1.0 + 2 ** -23], dtype=np.float64))


# --------------------------------------------------------------------------- trimmed mean
@pytest.mark.parametrize("beta,values,want", [
    (0.25, [1, 2, 3, 100], 2.5),            # floor(0.25 * 4) = 1 from each end
    (0.2, [-50, 1, 2, 3, 50], 2.0),         # beta C = 1 exactly: 1 from each end
    (0.19, [-50, 1, 2, 3, 50], 1.2),        # just below: floor(0.95) = 0, the plain mean
    (0.0, [1, 2, 3, 100], 26.5),
    (0.49, [1, 2, 30], 2.0),                # floor(1.47) = 1 of 3: the median
    (0.49, [1, 3], 2.0),                    # floor(0.98) = 0: nothing trimmed
])
def test_trimmed_mean_by_hand(beta, values, want):
    x = torch.tensor(values, dtype=torch.float32)[:, None]
    assert run("trimmed_mean", x, beta=beta).item() == pytest.approx(want, abs=1e-6)


def test_trimmed_mean_counts_beta_times_c_without_float_loss():
    # 0.29 * 100 = 28.999999999999996 in floating point: 29 values must go from each end
    x = torch.arange(100, dtype=torch.float32)[:, None]
    x[:29] = -1e6
    x[-29:] = 1e6
    assert run("trimmed_mean", x, beta=0.29).item() == pytest.approx(49.5)


def test_trimmed_mean_per_coordinate():
    x = rows([0.0, 9], [1, 8], [2, 7], [3, 6], [100, -100])
    assert run("trimmed_mean", x, beta=0.2).tolist() == [2.0, 7.0]


# --------------------------------------------------------------------------- Krum
LINE = rows([0.0], [1], [2], [3], [100])


def test_krum_scores_by_hand():
    # f = 1, n = 5: n - f - 2 = 2 nearest others
    assert krum_scores(LINE.double(), 1).tolist() == [5.0, 2.0, 2.0, 5.0, 97 ** 2 + 98 ** 2]
    x = rows([0.0, 0], [3, 4], [0, 1], [6, 8])
    # f = 0, n = 4: 2 nearest; squared distances 25 1 100 | 25 18 25 | 1 18 85 | 100 25 85
    assert krum_scores(x.double(), 0).tolist() == [26.0, 43.0, 19.0, 110.0]


def test_krum_at_its_bound_and_refused_below():
    # n = 2f + 3 = 5 with f = 1: rows 1 and 2 tie (score 2): the lower row wins
    assert run("krum", LINE, f=1).tolist() == [1.0]
    assert check(RuleSpec(kind="krum", f=1), 5) is None
    why = check(RuleSpec(kind="krum", f=1), 4)                       # n = 2f + 2
    assert why is not None and "f = 1" in why and "has 4" in why
    with pytest.raises(ValueError, match=r"f = 1 needs more than 2f \+ 2 = 4"):
        run("krum", LINE[:4], f=1)
    with pytest.raises(ValueError, match="f = 2"):
        run("multi_krum", LINE, f=2)
    assert run("krum", rows([0.0], [4], [5]), f=0).tolist() == [4.0]  # f = 0: n = 3 suffices


def test_multi_krum_by_hand():
    x = rows([0.0], [1], [2], [4], [100])       # f = 1 scores: 5, 2, 5, 13, big
    assert run("multi_krum", x, f=1, m=1).tolist() == [1.0]
    assert run("multi_krum", x, f=1, m=2).tolist() == [0.5]          # 1, then 0 (tie: lower)
    assert run("multi_krum", x, f=1).tolist() == [1.75]              # m = n - f = 4
    assert run("multi_krum", x, f=1, m=5).item() == pytest.approx(21.4)  # all: the plain mean
    assert "m = 6" in check(RuleSpec(kind="multi_krum", f=1, m=6), 5)
    with pytest.raises(ValueError, match="m = 6"):
        run("multi_krum", x, f=1, m=6)


def test_krum_ignores_the_weights():
    w = torch.tensor([0.01, 0.01, 0.01, 0.01, 0.96], dtype=torch.float64)
    assert run("krum", LINE, w, f=1).tolist() == [1.0]


# --------------------------------------------------------------------------- geometric median
def weiszfeld(x: np.ndarray, w: np.ndarray, iters: int, nu: float, tol: float) -> np.ndarray:
    """The numpy reference: smoothed Weiszfeld from the weighted mean (Pillutla et al.'s
    Algorithm), stopping when the weighted distance sum changes by at most tol of itself."""
    v = w @ x
    obj = float(np.sum(w * np.linalg.norm(x - v, axis=1)))
    for _ in range(iters):
        beta = w / np.maximum(nu, np.linalg.norm(x - v, axis=1))
        v = beta @ x / beta.sum()
        new = float(np.sum(w * np.linalg.norm(x - v, axis=1)))
        if abs(obj - new) <= tol * new:
            break
        obj = new
    return v


def test_geometric_median_known_answers():
    square = rows([1.0, 1], [-1, 1], [-1, -1], [1, -1], [0, 0])
    assert run("geometric_median", square).tolist() == [0.0, 0.0]
    # three collinear points: the middle one (converged: many iterations, no early stop)
    line = rows([0.0, 0], [1, 1], [10, 10])
    got = run("geometric_median", line, iters=500, tol=0.0)
    assert got.tolist() == pytest.approx([1.0, 1.0], abs=1e-5)
    # RFA's budget of 4 iterations is on its way, not there
    assert abs(run("geometric_median", line)[0].item() - 1.0) > 1e-3


def test_geometric_median_uses_the_weights():
    # two points: the weighted geometric median is the heavier one
    w = torch.tensor([0.7, 0.3], dtype=torch.float64)
    got = run("geometric_median", rows([0.0, 0], [3, 4]), w, iters=500, tol=0.0)
    assert got.tolist() == pytest.approx([0.0, 0.0], abs=1e-5)


@pytest.mark.parametrize("keys", [{}, {"iters": 50, "tol": 0.0}, {"iters": 50, "nu": 0.5},
                                  {"iters": 100}])
def test_geometric_median_matches_a_numpy_weiszfeld(keys):
    g = np.random.default_rng(7)
    x = g.normal(size=(9, 40)).astype(np.float32)
    x[:2] += 20                                     # two outliers
    w = g.uniform(0.1, 1.0, 9)
    w /= w.sum()
    spec = RuleSpec(kind="geometric_median", **keys)
    got = combine(spec, torch.from_numpy(x), torch.from_numpy(w))
    want = weiszfeld(x.astype(np.float64), w, spec.iters, spec.nu, spec.tol)
    np.testing.assert_allclose(got.numpy(), want.astype(np.float32), rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- clipping rules
def test_centered_clipping_by_hand():
    x = rows([3.0, 4], [0, 0.5])
    # one iteration from v = 0: [3, 4] clipped to norm 1 -> [0.6, 0.8]; [0, 0.5] within
    assert run("centered_clipping", x, tau=1.0).tolist() == pytest.approx([0.3, 0.65])
    # a second: from v = [0.3, 0.65], x1 - v = [2.7, 3.35] (clipped), x2 - v = [-0.3, -0.15]
    n = math.hypot(2.7, 3.35)
    want = [0.3 + (2.7 / n - 0.3) / 2, 0.65 + (3.35 / n - 0.15) / 2]
    assert run("centered_clipping", x, tau=1.0, iters=2).tolist() == pytest.approx(want)
    # one update is clipped too, and the weights are not read
    assert run("centered_clipping", rows([3.0, 4]), tau=1.0).tolist() == pytest.approx([.6, .8])
    w = torch.tensor([0.99, 0.01], dtype=torch.float64)
    assert run("centered_clipping", x, w, tau=1.0).tolist() == pytest.approx([0.3, 0.65])


def test_norm_bound_by_hand():
    x = rows([3.0, 4], [0, 1])
    w = torch.tensor([0.25, 0.75], dtype=torch.float64)
    # [3, 4] scaled to norm 2 -> [1.2, 1.6]; [0, 1] within; then the weighted mean
    assert run("norm_bound", x, w, bound=2.0).tolist() == pytest.approx([0.3, 1.15])
    assert run("norm_bound", rows([3.0, 4]), bound=1.0).tolist() == pytest.approx([0.6, 0.8])
    assert run("norm_bound", rows([0.0, 0]), bound=1.0).tolist() == [0.0, 0.0]


def test_norm_bound_within_the_bound_is_the_mean_to_the_bit():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 100, generator=g)
    w = torch.rand(6, generator=g, dtype=torch.float64)
    w = w / w.sum()
    got = run("norm_bound", x, w, bound=1e6)
    assert torch.equal(got, weighted_mean(x, w))


# --------------------------------------------------------------------------- no rows, one row
@pytest.mark.parametrize("kind", ROBUST)
def test_no_update_gives_zeros_and_keeps_the_dtype(kind):
    x = torch.empty(0, 3, dtype=torch.float32)
    got = run(kind, x, torch.empty(0, dtype=torch.float64), **NEEDED.get(kind, {}))
    assert got.dtype == torch.float32 and got.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("kind", ["median", "trimmed_mean", "krum", "multi_krum",
                                  "geometric_median"])
def test_one_update_is_the_result(kind):
    x = rows([0.1, -3e7, 5])
    keys = {"f": 3} if "krum" in kind else {}       # f beyond the bound: one row is no choice
    assert torch.equal(run(kind, x, **keys), x[0])
    assert check(RuleSpec(kind=kind, **keys), 1) is None


# --------------------------------------------------------------------------- properties
matrices = st.integers(1, 9).flatmap(lambda c: st.lists(
    st.lists(st.floats(-1e6, 1e6, width=32), min_size=3, max_size=3), min_size=c, max_size=c))


@settings(max_examples=60, deadline=None)
@given(matrices, st.sampled_from([0.0, 0.1, 0.25, 0.4]), st.randoms(use_true_random=False))
def test_order_statistics_stay_in_range_and_ignore_row_order(values, beta, shuffle):
    x = torch.tensor(values, dtype=torch.float32)
    perm = list(range(len(values)))
    shuffle.shuffle(perm)
    lo, hi = x.min(0).values, x.max(0).values
    for kind, keys in (("median", {}), ("trimmed_mean", {"beta": beta})):
        got = run(kind, x, **keys)
        assert bool((lo <= got).all() and (got <= hi).all())
        assert torch.equal(got, run(kind, x[perm], **keys))


@settings(max_examples=40, deadline=None)
@given(matrices, st.randoms(use_true_random=False))
def test_geometric_median_follows_its_rows_and_weights(values, shuffle):
    x = torch.tensor(values, dtype=torch.float32)
    w = torch.arange(1, len(values) + 1, dtype=torch.float64)
    w = w / w.sum()
    perm = list(range(len(values)))
    shuffle.shuffle(perm)
    got = run("geometric_median", x, w)
    again = run("geometric_median", x[perm], w[perm])
    scale = float(x.abs().max()) + 1.0
    assert torch.allclose(got, again, rtol=1e-5, atol=1e-5 * scale)
