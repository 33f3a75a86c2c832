"""The hyperparameters of the built-in algorithms, torch-free: the scenario loader, `hierfl
validate` and `hierfl docs` read them without importing the algorithms' transitions (torch).
Each algorithm module imports its own from here (`from .params import FedProxParams`); a plugin
algorithm keeps its Params next to its class."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..config.fields import all_of, at_most, each, non_negative, positive, spec, unit_interval


# fedavg.py
@dataclass(frozen=True)
class FedAvgParams:
    pass


# hierfavg.py
@dataclass(frozen=True)
class HierFAVGParams:
    edge_rounds: int = spec(1, "kappa2: edge aggregations per cloud round", check=positive)
    tier_rounds: list[int] | None = spec(
        None, "deeper trees: rounds per aggregator tier, from the top (overrides edge_rounds)",
        check=each(positive))


# fedprox.py
@dataclass(frozen=True)
class FedProxParams:
    mu: float = spec(0.01, "proximal coefficient mu (0 = FedAvg)", check=non_negative)


# scaffold.py
@dataclass(frozen=True)
class ScaffoldParams:
    option: Literal[1, 2] = spec(2, "control variate update: 1 = grad F_k(x) (an extra full "
                                 "gradient), 2 = c_k - c + (x - y)/(K eta_l) (the paper's choice)")
    server_lr: float = spec(1.0, "global step size eta_g", check=positive)


# feddyn.py
@dataclass(frozen=True)
class FedDynParams:
    alpha: float = spec(0.01, "dynamic regularisation coefficient alpha", check=positive)
    alpha_scaling: Literal["paper", "code"] = spec(
        "paper", "paper: one alpha; code: alpha / (n_k / mean n) per client (published code)")


# feddc.py
@dataclass(frozen=True)
class FedDCParams:
    alpha: float = spec(0.01, "weight of the drift-corrected prox term alpha", check=non_negative)
    alpha_scaling: Literal["paper", "code"] = spec(
        "paper", "paper: one alpha; code: alpha / (n_i / mean n) per client (published code)")
    server_rule: Literal["paper", "code"] = spec(
        "paper", "paper: n-weighted mean of theta_i + h_i; code: mean_S theta_i + mean_all h_i")
    clip: float | None = spec(None, "clip each local gradient's norm (published code: 10)",
                              check=positive)


# pfedme.py
@dataclass(frozen=True)
class PFedMeParams:
    lam: float = spec(15.0, "lambda: strength of the Moreau envelope coupling", check=positive)
    personal_steps: int = spec(5, "K: gradient steps on the inner (personal) problem per local "
                               "step", check=all_of(positive, at_most(1e5)))
    personal_lr: float = spec(0.01, "step size of the inner (personal) steps", check=positive)
    beta: float = spec(1.0, "server mixing: w <- (1 - beta) w + beta mean(w_k)",
                       check=all_of(positive, at_most(10.0)))
    train_all_clients: bool = spec(False, "published code: every client trains every round, only "
                                   "the selected ones are aggregated")
    hidden_l2: float = spec(0.0, "published code's (mu/2)||theta||^2 in the inner problem "
                            "(mu = 0.001 there)", check=non_negative)
    weighting: Literal["samples", "uniform"] = spec(
        "samples", "server mean over the selected clients: n_k-weighted or uniform (paper)")


# pfedmac.py
@dataclass(frozen=True)
class SparsityParams:
    kind: Literal["none", "l1", "logcosh"] = spec(
        "none", "none; l1: gamma ||theta||_1 by soft-thresholding (exact zeros); logcosh: smooth "
        "gamma * rho * sum log cosh(theta / rho)")
    gamma: float = spec(0.0, "weight of the sparsity term", check=non_negative)
    rho: float = spec(0.01, "logcosh: smoothing width (-> l1 as rho -> 0)", check=positive)


@dataclass(frozen=True)
class PFedMacParams:
    lam: float = spec(1.0, "lambda: weight of the correlation -lambda <theta, x>", check=positive)
    beta: float = spec(1.0, "server mixing: x <- (1 - beta) x + beta mean(x_k)",
                       check=all_of(positive, at_most(10.0)))
    inner_steps: int = spec(5, "K: (proximal) gradient steps on the inner problem per local step",
                            check=all_of(positive, at_most(1e5)))
    inner_lr: float = spec(0.01, "step size of the inner steps", check=positive)
    sparsity: SparsityParams = spec(default_factory=SparsityParams,
                                    doc="pFedMac-S: sparsity of the personal models")
    encoding: Literal["dense", "sparse", "auto"] = spec(
        "dense", "how uploads are counted: dense 4 B/entry, sparse 8 B/nonzero, auto the smaller")
    weighting: Literal["samples", "uniform"] = spec(
        "samples", "server mean over the selected clients: n_k-weighted or uniform")


# pfedmac_sh.py
def _edges_per_round(v: object) -> str | None:
    return None if v == "all" or (isinstance(v, int) and v > 0) else "must be > 0 or all"


# pfedmac_sh.py
@dataclass(frozen=True)
class PFedMacSHParams:
    lambda1: float = spec(1.0, "client level: weight of -lambda1 <theta, y> in the inner problem",
                          check=positive)
    lambda2: float = spec(1.0, "edge level: x_i <- x_i - eta2 lambda2 (x_i - mean_j y_ij)",
                          check=positive)
    eta2: float = spec(1.0, "edge step size eta2 (eta1 is the local lr, train.local.lr)",
                       check=positive)
    beta: float = spec(1.0, "cloud mixing: x <- (1 - beta) x + beta mean_S(x_i)",
                       check=all_of(positive, at_most(10.0)))
    inner_steps: int = spec(5, "(proximal) gradient steps on the inner problem per local step",
                            check=all_of(positive, at_most(1e5)))
    inner_lr: float = spec(0.01, "step size of the inner steps", check=positive)
    sparsity: SparsityParams = spec(default_factory=SparsityParams,
                                    doc="gamma1 phi_rho(theta): sparsity of the personal models")
    edges_per_round: int | Literal["all"] = spec(
        "all", "S: edges whose x_i the cloud averages (all edges still work)",
        check=_edges_per_round)
    edge_rounds: int = spec(1, "R: edge rounds per cloud round", check=all_of(positive,
                                                                            at_most(1e5)))
    client_lambda: Literal["lambda1", "lambda2"] = spec(
        "lambda1", "lambda of the client step y <- y - eta1 lambda (y - theta): lambda1 (the "
        "derivation) or lambda2 (as the slides write it)")
    upload: Literal["y", "theta", "increment"] = spec(
        "y", "client upload: y_ij; theta: the sparse personal model + K (exact for K = 1); "
        "increment: z = y_ij - (1 - a)^K y + K (exact, as sparse as theta)")
    encoding: Literal["dense", "sparse", "bitmap", "auto", "best"] = spec(
        "auto", "client uploads: dense 4 B/entry, sparse 8 B/nonzero, bitmap P/8 + 4 B/nonzero, "
        "auto = min(dense, sparse), best = min of the three")
    weighting: Literal["uniform", "samples"] = spec(
        "uniform", "edge and cloud means: uniform (the slides' 1/J, 1/S) or n-weighted")
    client_start: Literal["edge", "own"] = spec(
        "edge", "where ClientUpdate starts in edge rounds r >= 2 of a cloud round: edge (the "
        "edge's y_i, every round) or own (the client's own last y_ij of this cloud round)")

    def __post_init__(self) -> None:
        if self.client_start == "own" and self.upload != "y":
            raise ValueError("client_start: own needs upload: y (the edge rebuilds theta and "
                             "increment uploads from the y_i it sent)")


# apfl.py
@dataclass(frozen=True)
class APFLParams:
    alpha: float = spec(0.25, "mixing weight of the personal model v in v_bar (initial value if "
                        "adaptive)", check=unit_interval)
    adaptive: bool = spec(False, "learn alpha per client by gradient steps on the mixture")
    alpha_lr: float | None = spec(None, "step size of the alpha update (default: the local lr)",
                                  check=positive)


# ditto.py
@dataclass(frozen=True)
class DittoParams:
    lam: float = spec(1.0, "lambda: pull of the personal model towards the global one "
                      "(paper: 0.1, 1, 2)", check=non_negative)
    personal_lr: float | None = spec(None, "step size of the personal steps (default: the "
                                     "local lr)", check=positive)


# fedopt.py
def momentum(v: Any) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1) (1 keeps m at 0: the model never moves)"


@dataclass(frozen=True)
class FedAdagradParams:
    server_lr: float = spec(0.1, "server step size eta", check=positive)
    beta1: float = spec(0.9, "momentum of the pseudo-gradient m, in [0, 1)",
                        check=momentum)
    tau: float = spec(1e-3, "adaptivity tau: x += eta m / (sqrt(v) + tau)", check=non_negative)
    v0: float | None = spec(None, "initial v (default tau^2, the paper's)", check=non_negative)
    edge_rounds: int = spec(1, "edge aggregations (n_k-weighted means) per cloud round",
                            check=positive)
    tier_rounds: list[int] | None = spec(
        None, "deeper trees: rounds per aggregator tier, from the top (overrides edge_rounds)",
        check=each(positive))


@dataclass(frozen=True)
class FedAdamParams(FedAdagradParams):
    beta2: float = spec(0.99, "decay of the second moment v", check=unit_interval)


# fedsplit.py
@dataclass(frozen=True)
class FedSplitParams:
    step_size: float = spec(1.0, "s of the local prox_{s f_k} (its term is (1/(2s)) ||w - v||^2)",
                            check=positive)


# feddr.py
def below_two(v: Any) -> str | None:
    return None if 0 < v < 2 else "must be in (0, 2)"


@dataclass(frozen=True)
class FedDRParams:
    alpha: float = spec(1.0, "relaxation alpha of the y update, in (0, 2)", check=below_two)
    eta: float = spec(1.0, "prox parameter eta of prox_{eta f_i} (term (1/(2 eta)) ||w - y||^2)",
                      check=positive)


# fedpd.py
def probability(v: Any) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


@dataclass(frozen=True)
class FedPDParams:
    eta: float = spec(1.0, "penalty eta: the Lagrangian's (1/(2 eta)) ||x_i - x_0i||^2",
                      check=positive)
    p_comm: float = spec(1.0, "probability that a round communicates (x_0 = mean x_0i+)",
                         check=probability)


# proxskip.py
def _probability(v: float) -> str | None:
    return None if 1e-6 <= v <= 1 else "must be in [1e-6, 1]"


@dataclass(frozen=True)
class ProxSkipParams:
    p: float = spec(0.2, "probability of communicating after each local step (the mean local "
                    "steps of a round is 1/p)", check=_probability)


# ifca.py
@dataclass(frozen=True)
class IFCAParams:
    clusters: int = spec(2, "k: the number of cluster models", check=all_of(positive,
                                                                            at_most(64)))
    downlink: Literal["all", "chosen"] = spec(
        "all", "all: the k models every round (the paper); chosen: after the first round only "
        "the model of each client's last cluster (identities fixed)")
