"""One scenario: build the world once, run each algorithm on it, write the outputs.

world.py (World, build_world, make_algorithm), runner.py (run_scenario, run_algorithm),
recorder.py (what happens after each cloud round), checkpoint.py, progress.py."""
from .checkpoint import CHECKPOINT, checkpoint_arrays, load_checkpoint, save_checkpoint
from .recorder import AlgoResult, RoundRecorder, sparsity
from .runner import make_simulation, run_algorithm, run_scenario
from .world import World, build_world, make_algorithm

__all__ = ["AlgoResult", "CHECKPOINT", "RoundRecorder", "World", "build_world",
           "checkpoint_arrays", "load_checkpoint", "make_algorithm", "make_simulation",
           "run_algorithm", "run_scenario", "save_checkpoint", "sparsity"]
