"""`torch.func.functional_call` on a module that holds a layer at two places.

`nn.Sequential(layer, f, layer)` lists the layer's weight once in `named_parameters()` but
under two names in `named_parameters(remove_duplicate=False)` ("0.weight", "2.weight"), both
the same attribute of the same object. functional_call's `tie_weights=True` (its default) swaps
the new tensor in under each name and puts back, in the same order, what each swap found: the
second swap found the first one's tensor, so the module is left holding it instead of its own
parameter (torch 2.13; under vmap the module then holds a functorch tensor, "your tensor may
have escaped", and the next plain call fails; outside vmap the module silently keeps a client's
stale row). `call` ties by hand instead: every (module, attribute) slot is given once, a
parameter registered in two modules (`b.weight = a.weight`, two slots) under each of its
names, and `tie_weights=False`."""
from __future__ import annotations

from torch import Tensor, nn
from torch.func import functional_call


def slot_aliases(module: nn.Module) -> tuple[tuple[str, str], ...]:
    """(alias, name): a further slot that holds the parameter `name` of `named_parameters()`
    (a slot reached again under another name, a layer held twice, is left out)."""
    canon = {id(p): n for n, p in module.named_parameters()}
    seen, out = set(), []
    for name, p in module.named_parameters(remove_duplicate=False):
        owner, _, attr = name.rpartition(".")
        slot = (id(module.get_submodule(owner)), attr)
        if slot not in seen:
            seen.add(slot)
            if canon[id(p)] != name:
                out.append((name, canon[id(p)]))
    return tuple(out)


def call(module: nn.Module, params: dict[str, Tensor], aliases: tuple, args: tuple) -> Tensor:
    """functional_call(module, params, args) with each slot swapped once (module doc)."""
    if aliases:
        params = {**params, **{a: params[n] for a, n in aliases}}
    return functional_call(module, params, args, tie_weights=False)
