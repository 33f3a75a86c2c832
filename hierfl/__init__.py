"""hierfl: a discrete-event simulator of Client -> Edge -> Cloud federated learning.

Public API:
    load                -- read and validate a scenario file -> (Scenario, TopologySpec)
    run_scenario        -- simulate every algorithm of a scenario, writing OUT/<label>/...
    build_world         -- topology + data + model of a scenario
    Topology            -- the simulated system (a networkx DiGraph underneath)
    REGISTRY            -- algorithms by scenario name
    ScenarioError       -- bad input (file, key, value)
    write_report        -- OUT/report.md and figures from saved outputs
    register_model      -- @register_model("name") on factory(input_shape, num_classes, **options)
    register_algorithm  -- register_algorithm(cls) for an Algorithm subclass (name, Params)
    register_dataset    -- @register_dataset("name") on loader(n_clients, seed, **options)
    ClientArrays        -- what a data set loader returns per client (x/y train, x/y test)
    Algorithm           -- the base class of algorithms (hierfl.algorithms.base)
    load_plugins        -- import plugin files (what --plugin and a scenario's plugins: do)
"""
from .algorithms.base import Algorithm
from .algorithms.registry import REGISTRY, register_algorithm
from .data.registry import ClientArrays, register_dataset
from .plugins import load_all as load_plugins
from .report import write_report
from .run import build_world, run_scenario
from .config.errors import ScenarioError
from .models.registry import register_model
from .scenario.load import load
from .topology.graph import Topology

__all__ = ["load", "run_scenario", "build_world", "Topology", "REGISTRY", "ScenarioError",
           "write_report", "register_model", "register_algorithm", "register_dataset",
           "ClientArrays", "Algorithm", "load_plugins"]
