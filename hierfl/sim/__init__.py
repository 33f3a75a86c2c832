"""The timing side, torch-free: the engine (engine.py core, flat.py and hier.py rounds,
closed_form.py exact scheduling), links and the byte ledger, round policies, failures, step
budgets, message sizes and the trace. It moves messages, sizes and times; the learning side
is reached only through the round runner interface of work.py (implemented in exec/round.py)."""
