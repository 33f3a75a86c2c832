"""The scenario, as frozen dataclasses. Read once by `load`; everything downstream is typed."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from .asynchrony import ALPHA, ASYNC_POLICIES, CONCURRENCY, DRAIN, SERVER_LR, StalenessSpec
from .fields import Raw, all_of, at_most, below_one, each, non_negative, positive, seed_range, \
    spec, unit_interval

if TYPE_CHECKING:                       # config.topology imports this module's Dist
    from ..compress.spec import CompressSpec      # (compress/ checks it; config is below)
    from .topology import TopologySpec
    from .mobility import MobilitySpec


# ----------------------------------------------------------------------------- distributions
@dataclass(frozen=True)
class DistSpec:
    """A random attribute, drawn deterministically from the scenario seed."""

    dist: Literal["constant", "uniform", "lognormal", "normal", "choice"] = spec(
        doc="distribution family")
    value: float | None = spec(None, "constant: the value")
    low: float | None = spec(None, "uniform: lower bound")
    high: float | None = spec(None, "uniform: upper bound")
    median: float | None = spec(None, "lognormal: median (exp(mu))", check=positive)
    sigma: float | None = spec(None, "lognormal: sigma of the log", check=non_negative)
    mean: float | None = spec(None, "normal: mean")
    std: float | None = spec(None, "normal: standard deviation", check=non_negative)
    min: float | None = spec(None, "normal: values below are clipped to this")
    choices: list[float] | None = spec(None, "choice: the values")
    weights: list[float] | None = spec(None, "choice: their probabilities (default equal)")

    def __post_init__(self) -> None:
        need = {"constant": ["value"], "uniform": ["low", "high"], "lognormal": ["median", "sigma"],
                "normal": ["mean", "std"], "choice": ["choices"]}[self.dist]
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"dist {self.dist!r} needs {', '.join(missing)}")
        if self.dist == "uniform" and self.low > self.high:  # type: ignore[operator]
            raise ValueError("uniform needs low <= high")
        extra = [k for k in _DIST_KEYS if k not in _DIST_TAKES[self.dist]
                 and getattr(self, k) is not None]
        if extra:
            raise ValueError(f"dist {self.dist!r} takes {', '.join(_DIST_TAKES[self.dist])}; "
                             f"{', '.join(extra)} does not apply to it")
        if self.dist == "choice":
            if not self.choices:
                raise ValueError("choice needs a non-empty list of choices")
            if self.weights is not None and (len(self.weights) != len(self.choices)
                                             or min(self.weights) < 0 or sum(self.weights) <= 0):
                raise ValueError("weights must be non-negative, one per choice, not all zero")


Dist = float | DistSpec
_DIST_TAKES = {"constant": ("value",), "uniform": ("low", "high"), "lognormal": ("median", "sigma"),
               "normal": ("mean", "std", "min"), "choice": ("choices", "weights")}
_DIST_KEYS = tuple(k for ks in _DIST_TAKES.values() for k in ks)


def dist_mean(d: Dist) -> float:
    """The mean of a distribution spec (or a constant)."""
    if not isinstance(d, DistSpec):
        return float(d)
    if d.dist == "constant":
        return float(d.value)  # type: ignore[arg-type]
    if d.dist == "uniform":
        return (float(d.low) + float(d.high)) / 2  # type: ignore[arg-type]
    if d.dist == "lognormal":
        return float(d.median) * math.exp(min(float(d.sigma) ** 2 / 2, 700))  # type: ignore
    if d.dist == "normal":
        return max(float(d.mean), float(d.min) if d.min is not None else -math.inf)  # type: ignore
    w = d.weights or [1.0] * len(d.choices or [])
    return sum(a * b for a, b in zip(d.choices or [], w)) / max(sum(w), 1e-300)


# ----------------------------------------------------------------------------- data, model
@dataclass(frozen=True)
class PartitionSpec:
    kind: Literal["iid", "dirichlet", "shards", "classes_per_client", "quantity_skew"] = spec(
        "iid", "how labels are split over clients (docs/howto/datasets.md states each rule)")
    alpha: float = spec(0.5, "dirichlet: concentration (smaller = more skewed); quantity_skew "
                        "with sizes: power_law: the Pareto tail index of the sizes (smaller = "
                        "more skewed)", check=positive)
    shards_per_client: int = spec(2, "shards: label-sorted shards per client", check=positive)
    classes: int = spec(2, "classes_per_client: the distinct labels every client holds",
                        check=positive)
    sizes: Literal["lognormal", "power_law"] = spec(
        "lognormal", "quantity_skew: the law the client sizes are drawn from (labels iid)")
    sigma: float = spec(1.0, "quantity_skew with sizes: lognormal: the sigma of the sizes' log",
                        check=non_negative)
    min_size: int | None = spec(None, "dirichlet: NIID-Bench's rule, capped shares redrawn until "
                                "every client holds at least this many rows (unset: the plain "
                                "draw); quantity_skew: the fewest rows a client gets (unset: 1)",
                                check=positive)


@dataclass(frozen=True)
class ShiftSpec:
    rotate: float = spec(0.0, "feature skew: each group's images turned by an angle drawn "
                         "uniformly in [-rotate, rotate] degrees (0: none)",
                         check=all_of(non_negative, at_most(180)))
    noise: float = spec(0.0, "feature skew: group g of G adds Gaussian noise of sd "
                        "noise * g / (G - 1) to its pixels (on the [0, 1] scale; 0: none)",
                        check=non_negative)
    by: Literal["client", "edge"] = spec("client", "the group that shares a shift: each "
                                         "client, or the clients of one edge (their first "
                                         "edge)")


@dataclass(frozen=True)
class DataSpec:
    """The key every data set's spec has. Each data set declares its own spec, a frozen
    subclass holding only the keys it reads, next to its code (hierfl/data; the shared keys
    below by inheritance); `Scenario.data` is an instance of the named set's spec."""

    name: str = spec(doc="the federated data set: one of the data sets below, or one "
                     "registered with hierfl.register_dataset (a plugin's)")


@dataclass(frozen=True)
class Partitioned(DataSpec):
    """A data set whose training rows are split over the clients by a partition."""

    partition: PartitionSpec = spec(default_factory=PartitionSpec,
                                    doc="how the training rows are split over clients")
    shift: ShiftSpec = spec(default_factory=ShiftSpec, doc="feature skew: a rotation and noise "
                            "per client or per edge, on its training and test rows")


@dataclass(frozen=True)
class HeldOut(DataSpec):
    """A data set without a test set of its own: each client holds out a fraction."""

    test_fraction: float = spec(0.2, "the fraction of each client's rows held out as its "
                                "test rows", check=below_one)


@dataclass(frozen=True)
class ModelSpec:
    """The model: a registered name (built in: logreg, linear, mlp, cnn, char_lstm; more with
    `hierfl.register_model`). Keys other than those below are the model's own options, passed
    to its factory (cnn: channels, dense, kernel; char_lstm: embed, hidden, layers, vocab)."""

    EXTRA_KEYS: ClassVar[str] = "options"      # unknown keys are collected here (fields.build)

    name: str = spec(doc="registered model: logreg, linear, mlp, cnn, char_lstm or a plugin's")
    bias: bool | None = spec(None, "logreg, linear, mlp: include bias terms (default true)")
    hidden: list[int] | None = spec(None, "mlp: hidden layer widths (default [200, 200]); "
                                    "char_lstm: LSTM layer widths (default [256, 256])",
                                    check=each(all_of(positive, at_most(1e5))))
    init: Literal["seeded", "zeros"] = spec("seeded", "initial parameters")
    options: dict[str, Raw] = spec(default_factory=dict, doc="the model's own options, given here or "
                                   "as keys of model: (cnn: channels: [32, 64], dense: 512)")

    def __post_init__(self) -> None:
        if self.hidden is not None and any(h <= 0 or h > 100_000 for h in self.hidden):
            raise ValueError("hidden widths must be in 1..100000")


# ----------------------------------------------------------------------------- training
def _momentum(v: float) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1)"


@dataclass(frozen=True)
class OptimizerSpec:
    """The client's optimizer, torch.optim's rules per client, on the gradient of the local
    objective (the loss plus the algorithm's smooth terms); its state starts from zero every
    round (`state: reset`) or is the client's own, kept from its previous round (`keep`).
    Keys left out take torch's defaults; a key of another optimizer is refused."""

    name: Literal["sgd", "adam", "adamw"] = spec("sgd", "sgd (torch.optim.SGD), adam or adamw")
    momentum: float | None = spec(None, "sgd: momentum (default 0)", check=_momentum)
    dampening: float | None = spec(None, "sgd: momentum dampening (default 0)",
                                   check=unit_interval)
    nesterov: bool | None = spec(None, "sgd: Nesterov momentum (needs momentum > 0 and "
                                 "dampening 0; default false)")
    weight_decay: float | None = spec(None, "L2 penalty (adamw: decoupled); default 0, adamw "
                                      "0.01", check=non_negative)
    betas: list[float] | None = spec(None, "adam, adamw: [beta1, beta2] (default [0.9, 0.999])",
                                     check=each(_momentum))
    eps: float | None = spec(None, "adam, adamw: added to the denominator (default 1e-8)",
                             check=positive)
    amsgrad: bool | None = spec(None, "adam, adamw: the AMSGrad variant (default false)")
    state: Literal["reset", "keep"] = spec(
        "reset", "reset: momentum / moments start from zero every round (most papers); keep: "
        "each client's optimizer state is kept across its rounds (checkpointed, N x the state "
        "in memory)")

    KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "sgd": ("momentum", "dampening", "nesterov", "weight_decay"),
        "adam": ("betas", "eps", "weight_decay", "amsgrad"),
        "adamw": ("betas", "eps", "weight_decay", "amsgrad")}

    def __post_init__(self) -> None:
        takes = self.KEYS[self.name]
        extra = [k for k in ("momentum", "dampening", "nesterov", "weight_decay", "betas", "eps",
                             "amsgrad") if k not in takes and getattr(self, k) is not None]
        if extra:
            raise ValueError(f"optimizer {self.name!r} takes {', '.join(takes)}; "
                             f"{', '.join(extra)} does not apply to it")
        if self.betas is not None and len(self.betas) != 2:
            raise ValueError("betas must be two numbers [beta1, beta2]")
        if self.nesterov and (not self.momentum or self.dampening):
            raise ValueError("nesterov needs momentum > 0 and dampening 0 (as torch.optim.SGD)")

    def value(self, key: str) -> float | bool | list[float]:
        """A key's value, torch's default where it is left out."""
        v = getattr(self, key)
        if v is not None:
            return v
        if key == "weight_decay":
            return 0.01 if self.name == "adamw" else 0.0
        return {"momentum": 0.0, "dampening": 0.0, "nesterov": False, "betas": [0.9, 0.999],
                "eps": 1e-8, "amsgrad": False}[key]

    @property
    def plain(self) -> bool:
        """Plain SGD (every sgd key zero): the solver's own steps, fused where it can."""
        return self.name == "sgd" and not self.value("momentum") and \
            not self.value("weight_decay")


def _norm_type(v: Any) -> str | None:
    return None if v == "inf" or (not isinstance(v, str) and v > 0) else "must be > 0 or inf"


@dataclass(frozen=True)
class ClipSpec:
    """Gradient clipping per client before the step, as torch.nn.utils does it on one client's
    parameters: `max_norm` scales the gradient by max_norm / (||g||_p + 1e-6) where that is
    below 1 (clip_grad_norm_), `max_value` clamps each entry to [-v, v] (clip_grad_value_)."""

    max_norm: float | None = spec(None, "clip_grad_norm_: the largest norm of a client's "
                                  "gradient", check=positive)
    norm_type: float | Literal["inf"] = spec(2.0, "max_norm: the p of the norm (inf: the "
                                             "largest entry)", check=_norm_type)
    max_value: float | None = spec(None, "clip_grad_value_: the largest absolute entry",
                                   check=positive)

    def __post_init__(self) -> None:
        if (self.max_norm is None) == (self.max_value is None):
            raise ValueError("give max_norm (and norm_type) or max_value, one of them")
        if self.max_value is not None and self.norm_type != 2.0:
            raise ValueError("norm_type applies to max_norm, not max_value")


@dataclass(frozen=True)
class ScheduleSpec:
    """The local learning rate over cloud rounds, torch.optim.lr_scheduler's rules stepped once
    per round, or once per local step (`every: step`; hierfl/learn/schedules.py gives each
    formula and the step clock)."""

    kind: Literal["step", "exponential", "cosine", "warmup_cosine"] = spec(
        doc="step (StepLR), exponential (ExponentialLR), cosine (CosineAnnealingLR) or "
        "warmup_cosine (a linear ramp over warmup rounds, then cosine)")
    gamma: float | None = spec(None, "step, exponential: the factor", check=positive)
    step_size: int | None = spec(None, "step: rounds between two multiplications by gamma",
                                 check=positive)
    t_max: int | None = spec(None, "cosine: rounds of the half period (default: the rounds)",
                             check=positive)
    eta_min: float = spec(0.0, "cosine, warmup_cosine: the lowest lr", check=non_negative)
    warmup: int | None = spec(None, "warmup_cosine: rounds of the linear ramp", check=positive)
    every: Literal["round", "step"] = spec(
        "round", "round: one scheduler step per cloud round; step: one per local step (then "
        "step_size, t_max and warmup count local steps; needs train.local.steps)")

    NEEDS: ClassVar[dict[str, tuple[str, ...]]] = {
        "step": ("gamma", "step_size"), "exponential": ("gamma",), "cosine": (),
        "warmup_cosine": ("warmup",)}
    TAKES: ClassVar[dict[str, tuple[str, ...]]] = {
        "step": ("gamma", "step_size"), "exponential": ("gamma",),
        "cosine": ("t_max", "eta_min"), "warmup_cosine": ("warmup", "eta_min")}

    def __post_init__(self) -> None:
        missing = [k for k in self.NEEDS[self.kind] if getattr(self, k) is None]
        if missing:
            raise ValueError(f"lr_schedule {self.kind!r} needs {', '.join(missing)}")
        extra = [k for k in ("gamma", "step_size", "t_max", "warmup") if getattr(self, k)
                 is not None and k not in self.TAKES[self.kind]]
        if self.eta_min and "eta_min" not in self.TAKES[self.kind]:
            extra.append("eta_min")
        if extra:
            raise ValueError(f"lr_schedule {self.kind!r} takes "
                             f"{', '.join(self.TAKES[self.kind])}; {', '.join(extra)} does not "
                             "apply to it")


@dataclass(frozen=True)
class AugmentSpec:
    """Training-batch augmentation of image rows, as the CIFAR baselines' RandomCrop(size,
    padding=crop) + RandomHorizontalFlip: drawn per client, step and row from the client's
    key (learn/batches.Augment); evaluation and full-batch gradients see the rows as stored."""

    crop: int = spec(0, "random crop after zero padding of this many pixels per side (0: none)",
                     check=all_of(non_negative, at_most(64)))
    flip: bool = spec(False, "horizontal flip with probability 1/2")

    def __post_init__(self) -> None:
        if not self.crop and not self.flip:
            raise ValueError("give crop > 0 or flip: true (leave augment out for none)")


@dataclass(frozen=True)
class LocalSpec:
    steps: int | None = spec(None, "local steps per round (HierFAVG's kappa1)",
                             check=all_of(positive, at_most(1e7)))
    epochs: int | None = spec(None, "local epochs per round (instead of steps)",
                              check=all_of(positive, at_most(1e5)))
    batch_size: int | Literal["full"] = spec(10, "minibatch size, or full = full-batch GD",
                                             check=lambda v: None if v == "full" or v > 0
                                             else "must be > 0")
    lr: float = spec(0.01, "local learning rate", check=positive)
    lr_decay: float = spec(1.0, "multiply lr by this every cloud round", check=positive)
    gamma: float | None = spec(None, "stop when ||grad h|| <= gamma ||grad h(w_t)||",
                               check=unit_interval)
    check_every: int = spec(5, "steps between gamma checks (each check costs a full gradient)",
                            check=positive)
    optimizer: OptimizerSpec = spec(default_factory=OptimizerSpec,
                                    doc="the optimizer of the local steps (docs/howto/"
                                    "local-training.md)")
    clip: ClipSpec | None = spec(None, "clip each client's gradient before its step "
                                 "(docs/howto/local-training.md)")
    lr_schedule: ScheduleSpec | None = spec(None, "the lr over cloud rounds (instead of "
                                            "lr_decay; docs/howto/local-training.md)")
    solver: str | None = spec(None, "a local training plugin (@hierfl.register_local_train) "
                              "that runs each client's local work in plain torch instead of "
                              "the built-in SGD steps (docs/howto/local-training.md)")
    loss: str | None = spec(None, "a per-sample loss plugin (@hierfl.register_loss) in place "
                            "of the model's cross-entropy / squared error, also the train "
                            "loss reported (docs/howto/local-training.md)")
    augment: AugmentSpec | None = spec(None, "random crop and flip of image training batches, "
                                       "seeded per client (docs/howto/local-training.md)")

    def __post_init__(self) -> None:
        if self.steps is not None and self.epochs is not None:
            raise ValueError("give steps or epochs, not both")
        if self.lr_schedule is not None and self.lr_decay != 1.0:
            raise ValueError("give lr_decay or lr_schedule, not both (lr_decay is "
                             "lr_schedule {kind: exponential, gamma: lr_decay})")
        if self.lr_schedule is not None and self.lr_schedule.every == "step" and \
                self.steps is None:
            raise ValueError("lr_schedule every: step needs steps (a fixed number of local "
                             "steps per round: the step clock; with epochs each client has "
                             "its own)")


@dataclass(frozen=True)
class ExecutorSpec:
    kind: Literal["batched", "sequential", "ray"] = spec("batched", "how client work is run")
    address: str = spec("local", "ray: cluster address (auto, local or host:port)")
    clients_per_task: int = spec(64, "ray: clients per task", check=positive)
    threads: int = spec(1, "torch intra-op threads", check=all_of(positive, at_most(256)))
    device: Literal["auto", "cpu", "cuda"] = spec(
        "auto", "batched: where client work runs (auto: CUDA when present; cuda without CUDA "
        "is an error); sequential and ray run on the CPU")
    edge_batching: Literal["exact", "fast"] = spec(
        "exact", "hierarchical rounds timed in closed form: exact trains edges together only "
        "where no byte can change (a model whose matrix products are all small: every edge, "
        "evaluated rounds grouped by full-batch width; larger models one call per edge); fast "
        "trains every edge of a tier round in one call (10^5+ clients; results differ from one "
        "call per edge in the last bits)")


@dataclass(frozen=True)
class RoundSpec:
    policy: Literal["wait_all", "deadline_drop", "deadline_partial", "first_k", "fedasync",
                    "fedbuff"] = spec(
        "wait_all", "when an aggregation round closes; fedasync / fedbuff: asynchronous (a "
        "server or edge version per update / per k updates; docs/asynchrony.md)")
    deadline_s: float | None = spec(None, "deadline after the round starts (deadline policies)",
                                    check=positive)
    k: int | None = spec(None, "first_k: how many arrivals to keep; fedbuff: updates per "
                         "server version", check=positive)
    timeout_s: float | None = spec(None, "wait_all: give up after this long", check=positive)
    alpha: float = ALPHA
    server_lr: float = SERVER_LR
    staleness: StalenessSpec = spec(default_factory=StalenessSpec,
                                    doc="fedasync / fedbuff: staleness weighting")
    max_concurrency: int | None = CONCURRENCY
    drain_every: int | None = DRAIN

    @property
    def limit_s(self) -> float | None:
        """How long a round may wait: the deadline, or wait_all's / first_k's timeout."""
        return self.deadline_s if self.policy.startswith("deadline") else self.timeout_s

    def __post_init__(self) -> None:
        if self.policy.startswith("deadline") and self.deadline_s is None:
            raise ValueError(f"policy {self.policy!r} needs deadline_s")
        if self.policy == "first_k" and self.k is None:
            raise ValueError("policy 'first_k' needs k")
        if self.deadline_s is not None and not self.policy.startswith("deadline"):
            raise ValueError(f"deadline_s applies to the deadline policies, not {self.policy!r}"
                             + (" (use timeout_s)" if self.policy == "wait_all" else ""))
        if self.timeout_s is not None and self.policy.startswith("deadline"):
            raise ValueError(f"timeout_s applies to wait_all and first_k; {self.policy!r} "
                             "closes at deadline_s")
        if self.k is not None and self.policy not in ("first_k", "fedbuff"):
            raise ValueError(f"k applies to policies 'first_k' and 'fedbuff', not "
                             f"{self.policy!r}")
        if self.policy == "fedbuff" and self.k is None:
            raise ValueError("policy 'fedbuff' needs k (updates per server version)")
        if self.policy not in ASYNC_POLICIES:
            odd = [k for k, d in (("alpha", 0.6), ("server_lr", 1.0), ("max_concurrency", None),
                                  ("staleness", StalenessSpec()), ("drain_every", None))
                   if getattr(self, k) != d]
            if odd:
                raise ValueError(f"{', '.join(odd)} apply to the asynchronous policies "
                                 f"(fedasync, fedbuff), not {self.policy!r}")
        elif self.timeout_s is not None:
            raise ValueError(f"timeout_s does not apply to {self.policy!r}")


@dataclass(frozen=True)
class StragglerSpec:
    fraction: float = spec(0.0, "fraction of selected clients that straggle each round",
                           check=unit_interval)
    mode: Literal["random_epochs"] = spec("random_epochs", "how stragglers do less work")
    epochs_range: Literal["paper", "code"] = spec(
        "paper", "paper: uniform in [1, E]; code: [1, E-1] as in the published code")
    drop: Literal["auto", "always", "never"] = spec(
        "auto", "auto: FedAvg drops stragglers, other algorithms keep partial work")


@dataclass(frozen=True)
class TrainSpec:
    rounds: int = spec(100, "cloud rounds", check=all_of(positive, at_most(1e7)))
    clients_per_round: int | Literal["all"] = spec(
        10, "clients sampled uniformly without replacement each cloud round",
        check=lambda v: None if v == "all" or v > 0 else "must be > 0")
    local: LocalSpec = spec(default_factory=LocalSpec, doc="local solver")
    eval_every: int = spec(1, "evaluate every this many rounds (and the last)", check=positive)
    eval_every_s: float | None = spec(
        None, "also evaluate the first round (asynchronous: server version) at or after each "
        "multiple of this many simulated seconds", check=positive)
    duration_s: float | None = spec(None, "also end the run once this much simulated time has "
                                    "passed (at the end of a round; asynchronous runs: at that "
                                    "instant)", check=positive)
    round: RoundSpec = spec(default_factory=RoundSpec, doc="round policy (cloud tier)")
    edge_round: RoundSpec = spec(default_factory=RoundSpec, doc="round policy (edge tier)")
    executor: ExecutorSpec = spec(default_factory=ExecutorSpec, doc="client executor")
    edge_preaggregate: bool = spec(
        False, "flat linear aggregators (FedAvg, FedProx): each bottom-tier edge sends one "
        "weighted partial sum upward instead of every client's model")
    checkpoint_every: int = spec(
        10, "save a checkpoint every this many rounds (0 = never); `hierfl run --resume` "
        "continues from it", check=non_negative)
    divergence_bound: float = spec(1e6, "a parameter norm above this marks divergence",
                                   check=positive)
    timing: Literal["auto", "events"] = spec(
        "auto", "auto: a round whose timing depends on nothing else (FIFO links, no failures, "
        "wait_all rounds without timeout, no pre-aggregation, every edge reporting) is timed "
        "in closed form, with the same trace and numbers as the event loop, faster; events: "
        "play every message through simpy")
    max_state_gb: float | None = spec(
        None, "refuse (exit 2), before allocating it, an algorithm whose state between rounds "
        "(the model, the server's and every client's tensors: SCAFFOLD's control variates, "
        "FedDyn's and FedDC's drift, personal models) needs more than this many GB; the "
        "message names the size (default: half of this machine's memory)", check=positive)


@dataclass(frozen=True)
class ReportSpec:
    target_accuracy: float | None = spec(None, "accuracy target of the tables "
                                         "(default 0.9 x best final accuracy)", check=unit_interval)


@dataclass(frozen=True)
class MonitorSpec:
    dissimilarity_every: int | None = spec(
        None, "every M rounds: B(w) and mean ||grad F_k - grad f||^2 on the global model "
        "(an oracle measurement, free in simulated time)", check=positive)


@dataclass(frozen=True)
class AlgorithmEntry:
    """One algorithm of a scenario: its registered name, a label and typed hyperparameters."""

    name: str
    label: str
    params: object          # the algorithm's own frozen Params dataclass
    local: LocalSpec        # train.local with this entry's overrides
    edge_rounds: int        # aggregations at the edge per cloud round (1 = flat)
    stragglers: "StragglerSpec | None" = None   # this entry's override of scenario.stragglers
    tier_rounds: tuple[int, ...] | None = None  # deeper trees: rounds per aggregator tier,
    #                                             from the top (overrides edge_rounds)
    round: "RoundSpec | None" = None            # this entry's cloud round policy (train.round)
    compress: "CompressSpec | None" = None      # message codecs (compress/spec.py)
    mobility: "MobilitySpec | None" = None      # this entry's override of topology.mobility
    # issue 43 (scenario/protect.py reads them; exec/protect.py applies them):
    privacy: Any = None             # privacy/spec.PrivacySpec: DP of this entry (None: none)
    aggregate: Any = None           # robust/spec.AggregateSpec: the rule per tier (None: means)
    attack: Any = None              # robust/spec.AttackSpec: its own or the scenario's attack:
    #                                 (None: no attacker)
    secure_aggregation: Any = None  # secagg/spec.SecAggSpec (None: plain uploads)
    attack_own: bool = False        # its attack is its own attack: key (not the scenario's)

    def mobility_spec(self, topology: object) -> "MobilitySpec | None":
        """The mobility of this entry: its own `mobility:`, else the topology's (None: none)."""
        m = self.mobility if self.mobility is not None else getattr(topology, "mobility", None)
        return m if m is not None and m.kind != "none" else None

    def round_policy(self, train: "TrainSpec") -> "RoundSpec":
        """The cloud tier's round policy of this entry: its own `round:`, else train.round."""
        return self.round if self.round is not None else train.round


@dataclass(frozen=True)
class Scenario:
    """A scenario, validated in full: everything `hierfl run` needs, typed."""

    name: str
    seed: int
    file: str
    topology: "TopologySpec"   # resolved from a file path or an inline mapping
    data: DataSpec             # the named set's own spec (a subclass: its keys only)
    model: ModelSpec
    train: TrainSpec
    algorithms: tuple[AlgorithmEntry, ...]
    stragglers: StragglerSpec
    report: ReportSpec
    output: str
    monitor: MonitorSpec = MonitorSpec()
    topology_file: str = ""     # the file that holds the topology (this scenario's when inline)
    plugins: tuple[str, ...] = ()   # absolute paths of the scenario's plugin files, loaded


@dataclass(frozen=True)
class ScenarioFile:
    """The keys of a scenario file (what `load` reads before resolving algorithms)."""

    name: str = spec(doc="scenario name (letters, digits, '-', '_')")
    topology: Raw = spec(doc="topology file path (relative to this file) or inline mapping")
    data: dict = spec(doc="federated data set: its name and the keys that set reads (see "
                      "the data sets below)")
    model: ModelSpec = spec(doc="model")
    algorithms: list[Raw] = spec(doc="list of {name: ..., label: ..., <hyperparameters>}")
    seed: int = spec(0, "the one seed, in 0..2^32-1; every generator is derived from it and a "
                     "stable name", check=seed_range)
    train: TrainSpec = spec(default_factory=TrainSpec, doc="training schedule")
    stragglers: StragglerSpec = spec(default_factory=StragglerSpec, doc="stragglers")
    report: ReportSpec = spec(default_factory=ReportSpec, doc="report options")
    monitor: MonitorSpec = spec(default_factory=MonitorSpec, doc="oracle measurements")
    output: str = spec("", "output folder (relative to this file); --out overrides")
    attack: Raw = spec(None, "Byzantine clients of every algorithm entry (an entry's own "
                       "attack: overrides it): {kind: sign_flip, fraction: 0.25} or clients: "
                       "[ids] (docs/robustness.md)")
    plugins: list[str] = spec(default_factory=list, doc="Python files (relative to this file) "
                              "imported before the rest is read: they register models, "
                              "algorithms and data sets (hierfl.register_model, "
                              "register_algorithm, register_dataset)")
