"""A plugin algorithm's transitions, each call checked: what a third party's hook did wrong is
a ScenarioError (exit 2) naming the plugin, its file, the hook, the round, what was wrong and the
last frame of the plugin's own file, never a traceback from deep in the engine. The rounds
written before stay (the run stops where a ScenarioError stops it; learn/plugin_program.py does
the same for local training plugins).

`guard(algo, ...)` wraps the hooks on the instance (the driver's `self.local(...)` finds the
instance's attribute first, so every call path goes through it). Built-in algorithms are not
wrapped: their failures are our bugs, and stay tracebacks."""
from __future__ import annotations

import functools
import inspect
import sys
import traceback
from typing import Any, Callable

import torch

from ..config.errors import ScenarioError
from .base import Algorithm, RoundCtx, State, Upload, check_upload

# the hooks an algorithm overrides (algorithms/base.py), with the kind of value each returns
STATE_HOOKS = ("init_state", "server_update", "partials_update", "cloud_update")
HOOKS = STATE_HOOKS + ("broadcast", "personal", "local", "client_update", "trainees",
                       "round_steps", "cluster_of", "weights", "partial", "reporting",
                       "edge_start", "edge_model", "edge_aggregate", "edge_upload",
                       "upload_reference")


class PluginGuard:
    """Where a plugin algorithm's errors are reported, and the round now (`round_of`: the
    engine's cloud round, set when the simulation is built)."""

    def __init__(self, algo: Algorithm, file: str, key: str, label: str):
        self.algo, self.file, self.key, self.label = algo, file, key, label
        self.name = type(algo).name
        self.source = _source_file(type(algo))
        self.round_of: Callable[[], int] = lambda: 0

    def error(self, hook: str, what: str, t: int | None) -> ScenarioError:
        t = self.round_of() if t is None else t
        when = f"round {t}" if t else "its initialisation (before round 1)"
        return ScenarioError.one(
            self.file, self.key, self.name,
            f"{self.label}: the algorithm plugin {self.name!r} ({self.source}): its {hook} "
            f"{what}, in {when}; the outputs of the rounds before are kept")

    def call(self, hook: str, fn: Callable, args: tuple, kw: dict) -> Any:
        t = _round_in(hook, args, kw)
        before = self.algo.state
        try:
            out = fn(*args, **kw)
        except ScenarioError:
            raise
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code: named
            raise self.error(hook, f"raised {type(exc).__name__}: {exc}"
                             f"{_plugin_line(exc, self.source)}", t) from None
        what = self._wrong(hook, out, args, before)
        if what:
            raise self.error(hook, what, t)
        return out

    # ------------------------------------------------------------------ the returned values
    def _wrong(self, hook: str, out: Any, args: tuple, before: State | None) -> str | None:
        """What is wrong with `out`, the value hook returned, or None."""
        p = self._p(before)
        if hook in STATE_HOOKS:
            return _state_problem(out, before, p)
        if hook == "client_update":
            if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Upload)):
                return f"returned {_kind(out)}, not (State, Upload)"
            bad = _state_problem(out[0], before, p)
            if bad:
                return bad
            clients = args[1] if len(args) > 1 else None
            c = len(clients) if clients is not None else 0
            try:
                check_upload(self.algo, out[1], c)
            except (RuntimeError, TypeError, AttributeError) as exc:
                return f"returned a wrong upload: {exc}"
        if hook == "local" and not (hasattr(out, "init") and hasattr(out, "step")):
            return f"returned {_kind(out)}, not a LocalProgram (init, step)"
        if hook in ("broadcast", "edge_upload") and out is not None and not (
                isinstance(out, tuple) and all(isinstance(x, torch.Tensor) for x in out)):
            return f"returned {_kind(out)}, not a tuple of tensors"
        if hook == "edge_model" and p is not None and not (
                isinstance(out, torch.Tensor) and tuple(out.shape) == (p,)):
            return f"returned {_kind(out)}, not the model, a tensor of shape ({p},)"
        return None

    def _p(self, before: State | None) -> int | None:
        return None if before is None else before.w.numel()


def guard(algo: Algorithm, file: str, key: str, label: str) -> PluginGuard:
    """Wrap every hook of the plugin algorithm `algo` on the instance (module doc)."""
    g = PluginGuard(algo, file, key, label)
    for hook in HOOKS:
        fn = getattr(algo, hook)

        def checked(*args: Any, _hook: str = hook, _fn: Callable = fn, **kw: Any) -> Any:
            return g.call(_hook, _fn, args, kw)
        setattr(algo, hook, functools.wraps(fn)(checked))
    algo.plugin_guard = g           # type: ignore[attr-defined]
    return g


def _round_in(hook: str, args: tuple, kw: dict) -> int | None:
    """The round a hook is called for, where its arguments say (a RoundCtx, round_steps' and
    reporting's t)."""
    for a in (*args, *kw.values()):
        if isinstance(a, RoundCtx):
            return int(a.round)
    if hook in ("round_steps", "reporting") and args and isinstance(args[0], int):
        return args[0]
    return None


def _state_problem(out: Any, before: State | None, p: int | None) -> str | None:
    if not isinstance(out, State):
        return f"returned {_kind(out)}, not a State"
    if not isinstance(out.w, torch.Tensor):
        return f"returned a State whose w is {_kind(out.w)}, not a tensor"
    if p is not None and tuple(out.w.shape) != (p,):
        return f"returned a State whose model w has shape {tuple(out.w.shape)}, not ({p},)"
    if before is not None:
        old = {k: tuple(v.shape) for k, v in before.tensors().items()}
        for k, v in out.tensors().items():
            if k in old and tuple(v.shape) != old[k]:
                return f"returned a State whose {k} has shape {tuple(v.shape)}, was {old[k]}"
    return None


def _kind(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    if isinstance(x, tuple):
        return f"a tuple of {len(x)} ({', '.join(type(v).__name__ for v in x)})"
    return "None" if x is None else f"a {type(x).__name__}"


def _source_file(cls: type) -> str:
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if path:
        return str(path)
    try:
        return inspect.getfile(cls)
    except (TypeError, OSError):
        return cls.__module__


def _plugin_line(exc: BaseException, source: str) -> str:
    """" (at FILE:LINE)": the last frame of the plugin's own file (else the last frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if f.filename == source]
    last = (own or frames[-1:] or [None])[-1]
    return f" (at {last.filename}:{last.lineno})" if last is not None else ""
