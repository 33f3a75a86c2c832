"""The `privacy:` key of an algorithm entry (docs/privacy.md). Torch-free (`hierfl validate`
reads it).

Keys of one kind only are None by default and resolved in __post_init__ (`noise_at` cloud,
`weights` uniform for client_level; `sampling` poisson for sample_level), so a key of the other
kind is refused even when written at its value there."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..config.fields import FieldError, non_negative, positive, spec

CLIENT_ONLY = ("noise_at", "weights", "adaptive")
SAMPLE_ONLY = ("sampling",)
Relation = Literal["add_remove", "replace_one"]


def _open_unit(v: float) -> str | None:
    return None if 0 < v < 1 else "must be in (0, 1)"


def _clip(v: float | str) -> str | None:
    return None if v == "inf" or v > 0 else "must be > 0 (or inf: no clipping)"


@dataclass(frozen=True)
class AdaptiveSpec:
    """Adaptive clipping (Andrew et al. 2021): the clip follows the target quantile of the update
    norms, estimated from the noised count of the clients whose norm was within the clip."""

    target_quantile: float = spec(0.5, "gamma: the fraction of updates the clip should leave "
                                  "unclipped", check=_open_unit)
    lr: float = spec(0.2, "eta_C: the geometric step, C <- C exp(-eta_C (b - gamma))",
                     check=positive)
    count_noise: float | None = spec(None, "sigma_b: std of the noise on the count of "
                                     "unclipped updates; null: m/20 for m = "
                                     "train.clients_per_round (Andrew et al.'s suggestion), "
                                     "fixed for the run; must exceed z/2",
                                     check=non_negative)


@dataclass(frozen=True)
class PrivacySpec:
    """Differential privacy of one algorithm entry: clip, Gaussian noise and an RDP accountant."""

    kind: Literal["client_level", "sample_level"] = spec(
        doc="client_level: each client's update clipped and noised at a tier (DP-FedAvg); "
        "sample_level: per-sample clipping and noise in the local steps (DP-SGD)")
    clip: float | Literal["inf"] = spec(
        doc="C: the L2 norm each update (client_level) or per-sample gradient (sample_level) is "
        "clipped to; inf (write `inf`, not `.inf`): no clipping, only with noise_multiplier 0",
        check=_clip)
    noise_multiplier: float | None = spec(
        None, "z: noise std over sensitivity (std z*C on a sum of clipped terms); null: chosen "
        "from target_epsilon before the run", check=non_negative)
    noise_at: Literal["client", "edge", "cloud"] | None = spec(
        None, "client_level: where the noise is added (client: local DP; edge: each edge's "
        "aggregate; cloud: the cloud's aggregate); null: cloud")
    delta: float = spec(1e-5, "the delta of the (epsilon, delta) that metrics.csv reports",
                        check=_open_unit)
    weights: Literal["uniform", "samples"] | None = spec(
        None, "client_level: uniform: the mean of m updates (noise std z*C/m, DP-FedAvg's fixed "
        "denominator); samples: the n_k-weighted mean (std z*C*max_k w_k); null: uniform")
    adaptive: AdaptiveSpec | None = spec(
        None, "client_level: adaptive clipping from `clip` (finite) as the initial clip; "
        "null: a fixed clip")
    sampling: Literal["poisson", "fixed"] | None = spec(
        None, "sample_level: poisson: each sample in a batch with probability B/n_k; fixed: B "
        "drawn without replacement (accounted under replace-one); null: poisson")
    target_epsilon: float | None = spec(
        None, "with noise_multiplier: stop before the round that would pass it; without: the "
        "noise multiplier at which the planned run ends at it (and the same stop)", check=positive)

    def __post_init__(self) -> None:
        if self.clip == "inf":
            object.__setattr__(self, "clip", math.inf)
        c = self.clip
        if not (isinstance(c, (int, float)) and not isinstance(c, bool) and c > 0):
            raise FieldError("clip", "must be > 0 (or inf)")
        client = self.kind == "client_level"
        for k in SAMPLE_ONLY if client else CLIENT_ONLY:
            if getattr(self, k) is not None:
                raise FieldError(k, f"{k} applies to "
                                 f"{'sample_level' if client else 'client_level'}, not {self.kind}")
        defaults = {"noise_at": "cloud", "weights": "uniform"} if client else \
            {"sampling": "poisson"}
        for k, v in defaults.items():
            if getattr(self, k) is None:
                object.__setattr__(self, k, v)
        z, target = self.noise_multiplier, self.target_epsilon
        if z is None and target is None:
            raise ValueError("needs noise_multiplier, or target_epsilon to choose it")
        if z == 0 and target is not None:
            raise FieldError("target_epsilon", "noise_multiplier 0 gives epsilon = inf from "
                             "the first round: no target_epsilon can hold")
        if math.isinf(c) and (z != 0 or target is not None):
            raise FieldError("clip", "an infinite clip bounds no sensitivity (the noise z*C "
                             "would be infinite): give a finite clip, or noise_multiplier 0 "
                             "for no privacy")
        a = self.adaptive
        if a is not None:
            if math.isinf(c):
                raise FieldError("clip", "adaptive clipping starts from clip: give a finite "
                                 "one")
            if self.noise_at == "client":
                raise FieldError("adaptive", "adaptive clipping noises the count of unclipped "
                                 "updates where the updates are aggregated; with noise_at "
                                 "client each client's own bit would reach the server in the "
                                 "clear: use noise_at edge or cloud")
            if z is not None and z > 0 and a.count_noise is not None and \
                    not 2 * a.count_noise > z:
                raise FieldError("adaptive", f"count_noise {a.count_noise:g} must exceed "
                                 f"noise_multiplier / 2 = {z / 2:g}: the update's own noise "
                                 "multiplier is (z^-2 - (2 count_noise)^-2)^-1/2")

    @property
    def relation(self) -> Relation:
        """The neighbouring relation epsilon is stated for (the Accountant's `relation`):
        replace_one for local noise (any two updates of a client) and for fixed-size batches
        (the without-replacement analysis needs it); add_remove otherwise."""
        if self.noise_at == "client" or self.sampling == "fixed":
            return "replace_one"
        return "add_remove"
