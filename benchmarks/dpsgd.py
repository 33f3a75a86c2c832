"""Per-sample DP-SGD batched across clients (learn/dpsgd.py) against a per-client loop in the
style of Opacus (issue 43: at least 3x on the small CNN), alternated in one run, one thread.

    PYTHONPATH=. python benchmarks/dpsgd.py [--reps 7] [--clients 20] [--batch 32] [--fedavg]

One local DP-SGD step of C clients of batch B on MNIST-shaped random images (1x28x28, 10
classes): per-sample gradients, each clipped to norm C, summed, Gaussian noise of std z C added,
divided by B, an SGD step. The model: the registry's `cnn` with channels [8, 16] and dense 32
(the digits CNN's widths, 28,874 parameters on 28x28); --fedavg: the FedAvg paper's CNN (the
registry's defaults, 1,663,370 parameters).

- batched: `TermsProgram(..., dp=DPSGD(...)).step`, every client at once; its parts: the
  clipped sums (`clipped_sum`, "layers" path: one batched forward / backward, per-row weight
  gradients from each layer's input and output gradient), the noise (`gaussian`), and the rest
  (the update); "func path": the same step with per-sample gradients by torch.func (vmap over
  clients of vmap over rows of grad);
- loop: client by client, a plain torch loop: the client's parameters as a dict,
  torch.func.vmap(grad) over its rows (per-sample gradients, as Opacus's GradSampleModule gives),
  their norms, clip factors, the clipped sum, noise from the client's generator, the step;
  its parts: per-sample gradients, clip and sum, noise, step;
- plain: one batched SGD step without DP (model.grad), for scale.
Reports the median (and best) CPU time (wall time at --threads > 1) of --reps interleaved
repetitions."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from torch.func import functional_call, grad, vmap
from torch.nn import functional as F

from hierfl.config.schema import ModelSpec
from hierfl.learn.batches import Batch, noise_keys
from hierfl.learn.dpsgd import DPSGD, clipped_sum, gaussian
from hierfl.learn.solver import TermsProgram
from hierfl.models.registry import build_model

CLIP, Z, LR = 1.0, 1.1, 0.05
CLOCK = time.process_time     # CPU time at one thread; wall time at more


def loop_step(model, w, x, y, seeds, parts):
    """The per-client baseline; `parts` accumulates the time of each part."""
    module, out = model.module, []

    def row_loss(params, xr, yr):
        z = functional_call(module, params, (xr.view(1, *model.input_shape),))
        return F.cross_entropy(z, yr.view(1))
    per_row = vmap(grad(row_loss), in_dims=(None, 0, 0))
    for k in range(w.shape[0]):
        t0 = CLOCK()
        params = {n: v.view(s) for n, v, s in zip(model.names, w[k].split(model.sizes),
                                                   model.shapes)}
        g = per_row(params, x[k], y[k])
        t1 = CLOCK()
        norms = torch.stack([g[n].flatten(1).square().sum(1) for n in model.names]).sum(0).sqrt()
        f = torch.clamp(CLIP / norms.clamp_min(1e-30), max=1.0)
        summed = {n: torch.tensordot(f, g[n], dims=1) for n in model.names}
        t2 = CLOCK()
        gen = torch.Generator().manual_seed(seeds[k])
        noise = dict(zip(model.names, (v.view(s) for v, s in zip(
            torch.randn(model.n_params, generator=gen).split(model.sizes), model.shapes))))
        t3 = CLOCK()
        b = x.shape[1]
        out.append(torch.cat([(params[n] - LR * (summed[n] + Z * CLIP * noise[n]) / b)
                              .reshape(-1) for n in model.names]))
        w_new = out[-1]
        t4 = CLOCK()
        for key, dt in zip(("per-sample grads", "clip + sum", "noise", "step"),
                           (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            parts[key] = parts.get(key, 0.0) + dt
        del w_new
    return torch.stack(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--image", type=int, default=28, help="image side (8: the digits')")
    ap.add_argument("--fedavg", action="store_true", help="the FedAvg CNN (1.66 M parameters)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    global CLOCK
    CLOCK = time.process_time if a.threads == 1 else time.perf_counter
    opts = {} if a.fedavg else {"channels": [8, 16], "dense": 32}
    d = a.image * a.image
    model = build_model(ModelSpec(name="cnn", options=opts), d, 10, 10, (1, a.image, a.image))
    c, b = a.clients, a.batch
    g = torch.Generator().manual_seed(0)
    w = model.init(g).expand(c, -1).clone()
    x = torch.rand(c, b, d, generator=g)
    y = torch.randint(0, 10, (c, b), generator=g)
    m = torch.full((c, b), 1.0 / b)
    batch = Batch(x, y, m)
    keys = noise_keys(0, 1, 0, np.arange(c))
    prog = TermsProgram(model, w, dp=DPSGD(CLIP, Z, keys))
    prog_func = TermsProgram(model, w, dp=DPSGD(CLIP, Z, keys, path="func"))
    s = prog.init()
    count = s[-1]
    from hierfl.learn.batches import step_seeds
    seeds = step_seeds(keys, count)

    # the two agree (the same noise streams too): the batched step is the loop's
    ref = loop_step(model, w, x, y, seeds, {})
    got = prog.step(s, batch, LR)[0]
    err = float((got - ref).abs().max() / (ref - w).abs().max())
    loop_parts: dict[str, float] = {}
    cases = {
        "batched DP-SGD step": lambda: prog.step(s, batch, LR),
        "  clipped sums (layers)": lambda: clipped_sum(model, w, x, y, m, CLIP),
        "  noise": lambda: gaussian(keys, count, w),
        "batched, func path": lambda: prog_func.step(s, batch, LR),
        "  clipped sums (func)": lambda: clipped_sum(model, w, x, y, m, CLIP, "func"),
        "per-client loop": lambda: loop_step(model, w, x, y, seeds, loop_parts),
        "  clipped sums client by client (layers)": lambda: [
            clipped_sum(model, w[k:k + 1], x[k:k + 1], y[k:k + 1], m[k:k + 1], CLIP)
            for k in range(c)],
        "plain batched SGD step (no DP)": lambda: w - LR * model.grad(w, x, y, m),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for f in cases.values():
        f()
    loop_parts.clear()
    for _ in range(a.reps):
        for k, f in cases.items():
            t = CLOCK()
            f()
            times[k].append(CLOCK() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"cnn {opts or '(FedAvg)'} on {a.image}x{a.image}: {model.n_params} parameters, "
          f"{c} clients x batch {b}, {a.threads} thread(s), {a.reps} reps; batched vs loop max rel. diff {err:.1e}")
    for k, v in times.items():
        print(f"  {k:36s} {med[k] * 1e3:9.1f} ms (best {min(v) * 1e3:.1f})")
    for k, v in loop_parts.items():
        print(f"    loop: {k:26s} {v / a.reps * 1e3:9.1f} ms (mean)")
    base = med["per-client loop"]
    print(f"  loop / batched: {base / med['batched DP-SGD step']:.2f}x; loop / func path: "
          f"{base / med['batched, func path']:.2f}x; batched / plain SGD step: "
          f"{med['batched DP-SGD step'] / med['plain batched SGD step (no DP)']:.2f}x")


if __name__ == "__main__":
    main()
