"""hierfl: a discrete-event simulator of Client -> Edge -> Cloud federated learning.

Public API:
    load                -- read and validate a scenario file -> Scenario (.topology: its topology)
    run_scenario        -- simulate every algorithm of a scenario, writing OUT/<label>/...
    build_world         -- topology + data + model of a scenario
    Topology            -- the simulated system (a networkx DiGraph underneath)
    REGISTRY            -- algorithms by scenario name
    ScenarioError       -- bad input (file, key, value)
    write_report        -- OUT/report.md and figures from saved outputs
    register_model      -- @register_model("name") on factory(input_shape, num_classes, **options)
    declare_model       -- a model declared without importing its factory ("module:function")
    register_algorithm  -- register_algorithm(cls) for an Algorithm subclass (name, Params)
    declare_algorithm   -- the torch-free declaration of an algorithm (Params, caps, state size)
    Capabilities, StateSize, EdgeRounds, TierRounds -- what a declaration says
    register_dataset    -- @register_dataset("name") on loader(n_clients, seed, **options)
    declare_dataset     -- a data set's declaration: its own spec dataclass, loader and facts
    declare_codec       -- a message codec's declaration (keys, byte rule, encode rule)
    ClientArrays        -- what a data set loader returns per client (x/y train, x/y test)
    register_local_train -- @register_local_train("name") on fn(model, batches, ctx): one
                           client's local work in plain torch (train.local.solver)
    register_loss       -- @register_loss("name") on loss(z, y) -> per-sample losses
                           (train.local.loss)
    LocalContext        -- the ctx a local training function receives (lr, budget, round, ...)
    Algorithm           -- the base class of algorithms (hierfl.algorithms.base)
    load_plugins        -- import plugin files (what --plugin and a scenario's plugins: do)

The names are imported when first used (PEP 562), so `import hierfl` and the commands that do
not train (`--help`, validate, report, topology, docs) do not pay for torch."""
from __future__ import annotations

import importlib
from typing import Any

_WHERE = {                  # public name -> (module, attribute)
    "load": ("hierfl.scenario.load", "load"),
    "run_scenario": ("hierfl.run", "run_scenario"),
    "build_world": ("hierfl.run", "build_world"),
    "Topology": ("hierfl.topology.graph", "Topology"),
    "REGISTRY": ("hierfl.algorithms.registry", "REGISTRY"),
    "ScenarioError": ("hierfl.config.errors", "ScenarioError"),
    "write_report": ("hierfl.report", "write_report"),
    "register_model": ("hierfl.models.registry", "register_model"),
    "register_algorithm": ("hierfl.algorithms.registry", "register_algorithm"),
    "declare_algorithm": ("hierfl.algorithms.registry", "declare_algorithm"),
    "Capabilities": ("hierfl.algorithms.registry", "Capabilities"),
    "StateSize": ("hierfl.algorithms.registry", "StateSize"),
    "EdgeRounds": ("hierfl.algorithms.registry", "EdgeRounds"),
    "TierRounds": ("hierfl.algorithms.registry", "TierRounds"),
    "declare_model": ("hierfl.models.registry", "declare_model"),
    "declare_dataset": ("hierfl.data.registry", "declare_dataset"),
    "declare_codec": ("hierfl.compress.registry", "declare_codec"),
    "register_dataset": ("hierfl.data.registry", "register_dataset"),
    "ClientArrays": ("hierfl.data.registry", "ClientArrays"),
    "register_local_train": ("hierfl.learn.local_train", "register_local_train"),
    "register_loss": ("hierfl.learn.local_train", "register_loss"),
    "LocalContext": ("hierfl.learn.local_train", "LocalContext"),
    "Algorithm": ("hierfl.algorithms.base", "Algorithm"),
    "load_plugins": ("hierfl.plugins", "load_all"),
}

__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'hierfl' has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
