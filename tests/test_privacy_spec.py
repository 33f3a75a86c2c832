"""The `privacy:` keys (hierfl/privacy/spec.py) as the scenario loader builds them: defaults
resolved per kind, infinity spelt `inf`, and each cross-key refusal naming its key."""
from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import yaml

from hierfl.config.errors import Problems
from hierfl.config.fields import build, is_fail
from hierfl.privacy.spec import AdaptiveSpec, PrivacySpec


def _build(text: str) -> tuple[object, list]:
    p = Problems("s.yaml")
    out = build(PrivacySpec, yaml.safe_load(text), p, "algorithms[0].privacy")
    return out, [(i.key, i.message) for i in p.items]


def test_defaults_resolved_per_kind():
    c, probs = _build("{kind: client_level, clip: 1.0, noise_multiplier: 1.1}")
    assert not probs
    assert (c.noise_at, c.weights, c.sampling, c.delta, c.adaptive) == \
        ("cloud", "uniform", None, 1e-5, None)
    assert c.relation == "add_remove"
    s, probs = _build("{kind: sample_level, clip: 1, noise_multiplier: 0.8}")
    assert not probs
    assert (s.sampling, s.noise_at, s.weights, s.clip) == ("poisson", None, None, 1.0)


def test_relation_per_noise_tier_and_sampling():
    assert PrivacySpec("client_level", 1.0, 1.0, noise_at="client").relation == "replace_one"
    assert PrivacySpec("client_level", 1.0, 1.0, noise_at="edge").relation == "add_remove"
    assert PrivacySpec("sample_level", 1.0, 1.0, sampling="fixed").relation == "replace_one"


def test_infinite_clip_is_written_inf():
    s, probs = _build("{kind: client_level, clip: inf, noise_multiplier: 0}")
    assert not probs and s.clip == math.inf
    assert PrivacySpec("client_level", math.inf, 0.0).clip == math.inf   # from Python
    _, probs = _build("{kind: client_level, clip: .inf, noise_multiplier: 0}")
    assert probs and probs[0][0].endswith("clip") and "'inf'" in probs[0][1]


def test_adaptive_defaults():
    s, probs = _build("{kind: client_level, clip: 0.5, noise_multiplier: 1.0, adaptive: {}}")
    assert not probs and s.adaptive == AdaptiveSpec(0.5, 0.2, None)


@pytest.mark.parametrize("text,key,words", [
    ("{kind: sample_level, clip: 1, noise_multiplier: 1, noise_at: cloud}", "noise_at",
     "applies to client_level"),
    ("{kind: sample_level, clip: 1, noise_multiplier: 1, weights: uniform}", "weights",
     "applies to client_level"),
    ("{kind: sample_level, clip: 1, noise_multiplier: 1, adaptive: {}}", "adaptive",
     "applies to client_level"),
    ("{kind: client_level, clip: 1, noise_multiplier: 1, sampling: poisson}", "sampling",
     "applies to sample_level"),
    ("{kind: client_level, clip: inf, noise_multiplier: 0, adaptive: {}}", "clip",
     "finite"),
    ("{kind: client_level, clip: inf, noise_multiplier: 1}", "clip", "infinite clip"),
    ("{kind: client_level, clip: inf, target_epsilon: 3}", "clip",
     "infinite clip"),
    ("{kind: client_level, clip: 1}", "", "needs noise_multiplier"),
    ("{kind: client_level, clip: 1, noise_multiplier: 0, target_epsilon: 3}",
     "target_epsilon", "epsilon = inf"),
    ("{kind: client_level, clip: 1, noise_multiplier: 1, noise_at: client, adaptive: {}}",
     "adaptive", "noise_at edge or cloud"),
    ("{kind: client_level, clip: 1, noise_multiplier: 1, adaptive: {count_noise: 0.5}}",
     "adaptive", "must exceed noise_multiplier / 2"),
    ("{kind: client_level, clip: 0, noise_multiplier: 1}", "clip", "must be > 0"),
    ("{kind: client_level, clip: 1, noise_multiplier: -1}", "noise_multiplier", ">= 0"),
    ("{kind: client_level, clip: 1, noise_multiplier: 1, delta: 1}", "delta", "(0, 1)"),
    ("{kind: client_level, clip: 1, noise_multiplier: 1, target_epsilon: 0}",
     "target_epsilon", "> 0"),
    ("{kind: client_level, clip: 1, noise_multiplier: 1, adaptive: {target_quantile: 1}}",
     "adaptive.target_quantile", "(0, 1)"),
    ("{kind: client_level, clip: 1, noise_multiplier: 1, adaptive: {lr: 0}}",
     "adaptive.lr", "> 0"),
    ("{kind: record_level, clip: 1, noise_multiplier: 1}", "kind", "expected one of"),
    ("{clip: 1, noise_multiplier: 1}", "kind", "required"),
])
def test_refusals_name_their_key(text, key, words):
    out, probs = _build(text)
    assert is_fail(out)
    (k, msg), = probs
    assert k == "algorithms[0].privacy" + (f".{key}" if key else "")
    assert words in msg


def test_accepted_edge_cases():
    """What the refusals must not catch: z 0 with an infinite clip (the no-privacy run),
    count noise just above z/2, target_epsilon choosing z, adaptive at the edges."""
    for text in ["{kind: client_level, clip: inf, noise_multiplier: 0}",
                 "{kind: client_level, clip: 1, noise_multiplier: 1, "
                 "adaptive: {count_noise: 0.51}}",
                 "{kind: client_level, clip: 1, target_epsilon: 2, adaptive: {}}",
                 "{kind: client_level, clip: 1, noise_multiplier: 0, noise_at: edge, "
                 "adaptive: {count_noise: 0}}",
                 "{kind: sample_level, clip: 2, target_epsilon: 8, sampling: fixed}"]:
        out, probs = _build(text)
        assert not probs and not is_fail(out), text


def test_keys_and_accountant_import_no_torch():
    """`hierfl validate` reads the keys, and the accountant runs beside it: neither needs
    torch."""
    probe = ("import sys; from hierfl.privacy.spec import PrivacySpec; "
             "from hierfl.privacy.accountant import Accountant; "
             "a = Accountant(1e-5, 1.0); a.step(0.5); a.epsilon(); "
             "print('torch' in sys.modules)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=root, env={**os.environ, "PYTHONPATH": root})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
