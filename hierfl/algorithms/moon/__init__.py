"""MOON (Li, He, Song, *Model-Contrastive Federated Learning*, CVPR 2021, arXiv 2103.16257).

Client i in round t starts from the received global model w^t and minimises, by (S)GD,

    l = l_sup(w; (x, y)) + mu l_con,
    l_con = -log( exp(sim(z, z_glob)/T) / (exp(sim(z, z_glob)/T) + exp(sim(z, z_prev)/T)) )

(eq. 3-4) per sample x, averaged as the supervised loss is: sim is the cosine similarity,
z = R_w(x) the representation of x under the client's current model, z_glob = R_{w^t}(x)
under the global model it received (fixed during the round), z_prev = R_{w_i^prev}(x) under its
own local model of its previous participation (fixed). R is the input of the model's output
layer: the last `nn.Linear` of a torch module (`modules()` order), the input of the last affine
layer of a stacked model (an MLP's last hidden activation). The paper adds a projection head to
its networks; the published code also runs without one, as here. For a one-layer model
(logreg, linear) R is x itself: l_con does not depend on w and MOON is FedAvg.

Server: FedAvg's n_k-weighted mean of the uploaded w_i. Client state: w_i^prev (N, P),
initialised to w^0 (the published code's previous models start as the global one), replaced by
w_i after a round in which client i took at least one step. Messages: FedAvg's (w down, w_i up).
Each local step is charged two gradient evaluations (the loss's, and the contrastive term's:
the two fixed models' forward passes and z's backward, about one more)."""
from __future__ import annotations

from dataclasses import dataclass

from ...config.fields import non_negative, positive, spec
from ..registry import Capabilities, StateSize, declare_algorithm


@declare_algorithm("moon", code=f"{__name__}.algorithm:Moon",
                   summary="MOON (Li, He, Song, CVPR 2021): model-contrastive local loss",
                   caps=Capabilities(linear_aggregate=True, model_state=False, robust=True),
                   state=StateSize(fixed=1, per_client=1))
@dataclass(frozen=True)
class MoonParams:
    mu: float = spec(1.0, "weight mu of the model-contrastive loss l_con", check=non_negative)
    temperature: float = spec(0.5, "temperature T of l_con", check=positive)
