"""A client's local training written by the user, and a loss of the user's: two plugin kinds.

    @hierfl.register_local_train("my_train")       # train.local: {solver: my_train}
    def my_train(model, batches, ctx):
        opt = torch.optim.SGD(model.parameters(), lr=ctx.lr, momentum=0.9)
        for x, y in batches:                       # ends where the budget ends
            opt.zero_grad()
            ctx.loss(model(x), y).backward()
            opt.step()

A local training function runs one client's local work in plain torch (learn/plugin_program.py
runs it per client): `model` is a fresh copy of the scenario's module holding the client's start
parameters, `batches` yields the client's minibatches (x shaped as the model reads it, y) of the
plan the built-in solver would use and ends where the step budget ends (the planned steps, a
straggler's or a deadline's cut, a gamma target met), and `ctx` says the rest (`LocalContext`).
What the module holds when the function returns is the client's final iterate; the batches it
took are its steps, charged in compute time as the built-in solver's steps are.

    @hierfl.register_loss("smoothed")              # train.local: {loss: smoothed}
    def smoothed(z, y):                            # z (..., B, o), y (..., B) -> (..., B)
        ...

A loss replaces the model's per-sample loss (cross-entropy, or the mean squared error of a
regression) everywhere the model's loss is used: the built-in solver's gradients (batched, vmap
included), a local training function's `ctx.loss`, and the train loss reported in metrics.csv;
accuracy is still the argmax's.

This module is torch-free (declarations only): `hierfl validate` checks the names."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..registry import Declaration, Registry

if TYPE_CHECKING:
    import torch

LocalTrain = Callable[..., Any]          # (model: nn.Module, batches, ctx: LocalContext) -> None
Loss = Callable[..., Any]                # (z (..., B, o), y (..., B)) -> (..., B)

# no built-ins: the built-in solver is train.local without `solver` (hierfl.learn has no
# subpackage to scan)
LOCAL_TRAINS = Registry("local training function", __package__)
LOSSES = Registry("loss", __package__)


@dataclass(frozen=True)
class LocalContext:
    """What a local training function knows of its client's round."""

    lr: float                   # the round's local learning rate (train.local.lr, its schedule)
    budget: int                 # the most batches `batches` yields (the step budget)
    round: int                  # the cloud round t (1, 2, ...)
    edge_round: int             # the edge round within it (0 for flat algorithms)
    client: int                 # the client's id
    generator: "torch.Generator"    # the client's own stream for (seed, client, round, edge
    #                                 round): draw from it, never from torch's global generator
    batch_size: int | str       # train.local.batch_size (a short last batch has fewer rows)
    device: "torch.device"      # where the model and the batches are
    loss: Callable[..., "torch.Tensor"]     # loss(outputs (B, o), y (B,)) -> the batch's mean
    #                                         loss: the scenario's (train.local.loss or the
    #                                         model's), as the built-in solver's steps use it


def _declare(registry: Registry, name: str, fn: Callable) -> None:
    registry.declare(Declaration(registry.kind, name, obj=fn,
                                 origin=str(getattr(fn, "__module__", "")),
                                 summary=(fn.__doc__ or "").strip().split("\n")[0]))


def register_local_train(name: str) -> Callable[[LocalTrain], LocalTrain]:
    """Register `fn(model, batches, ctx)` as `train.local: {solver: <name>}` (or an algorithm
    entry's `local: {solver: <name>}`): one client's local work in plain torch."""
    def deco(fn: LocalTrain) -> LocalTrain:
        _declare(LOCAL_TRAINS, name, fn)
        return fn
    return deco


def register_loss(name: str) -> Callable[[Loss], Loss]:
    """Register `loss(z, y)` -> per-sample losses (..., B) from outputs z (..., B, o) and
    targets y (..., B) as `train.local: {loss: <name>}`; it must stay batched (any leading
    dimensions, torch.func.vmap included): elementwise torch operations over the last axes."""
    def deco(fn: Loss) -> Loss:
        _declare(LOSSES, name, fn)
        return fn
    return deco
