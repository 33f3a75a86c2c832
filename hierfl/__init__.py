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
"""
from .algorithms.registry import REGISTRY
from .report import write_report
from .run import build_world, run_scenario
from .config.errors import ScenarioError
from .models.registry import register_model
from .scenario.load import load
from .topology.graph import Topology

__all__ = ["load", "run_scenario", "build_world", "Topology", "REGISTRY", "ScenarioError",
           "write_report", "register_model"]
