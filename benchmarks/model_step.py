"""One local step (loss + gradient for C clients) of the torch models: the TorchModel's paths
against a plain per-client nn.Module loop (forward, backward, read .grad), single thread
("vmap, functorch": the vmap path through torch.func itself, as before models/grouped.py).

    PYTHONPATH=. python benchmarks/model_step.py [--reps 5]

Cases: the FedAvg CNN on FEMNIST-shaped random data (28x28, 62 classes), the small digits CNN
(8x8, channels 8/16, dense 32, 10 classes), LEAF's char-LSTM (80 characters, batch 10); 20
clients of batch 20 (LSTM: 10). Reports the best CPU time of --reps interleaved repetitions."""
from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from hierfl.allocator import keep_freed_memory
from hierfl.config.schema import ModelSpec
from hierfl.models.registry import build_model


def plain_loop(model, w, x, y, m):
    mod, out = model.module, []
    for k in range(w.shape[0]):
        with torch.no_grad():
            for p, v in zip(mod.parameters(), w[k].split(model.sizes)):
                p.copy_(v.view(p.shape))
        mod.zero_grad()
        z = mod(x[k].reshape(x.shape[1], *model.input_shape))
        (nn.functional.cross_entropy(z, y[k], reduction="none") * m[k]).sum().backward()
        out.append(torch.cat([p.grad.reshape(-1) for p in mod.parameters()]))
    return torch.stack(out)


def case(name, spec, shape, classes, c, b, reps, text=False):
    model = build_model(spec, 0, classes, classes, shape)
    g = torch.Generator().manual_seed(0)
    w = torch.stack([model.init(g) for _ in range(c)])
    d = int(torch.tensor(shape).prod())
    x = torch.randint(0, classes, (c, b, d), generator=g) if text else torch.randn(c, b, d)
    y = torch.randint(0, classes, (c, b), generator=g)
    m = torch.full((c, b), 1.0 / b)
    paths = {"nn.Module loop": lambda: plain_loop(model, w, x, y, m),
             "TorchModel loop": lambda: model.loss_grad_autograd(w, x, y, m),
             "TorchModel vmap": lambda: model._loss_grad_vmap(w, x, y, m)}
    if getattr(model, "grouped", None) is not None:   # the vmap path before models/grouped.py
        paths["vmap, functorch"] = lambda: model._loss_grad_vmap(w, x, y, m, functorch=True)
    best = {k: float("inf") for k in paths}
    for f in paths.values():
        f()
    for _ in range(reps):
        for k, f in paths.items():
            t = time.process_time()       # CPU time: less sensitive to a shared machine
            f()
            best[k] = min(best[k], time.process_time() - t)
    flops = 3 * model.fwd_flops * c * b
    base = best["nn.Module loop"]
    print(f"{name}: {model.n_params} parameters, {model.fwd_flops / 1e6:.3g} MFLOP/sample "
          f"forward, auto path: {model.batching}")
    for k, t in best.items():
        print(f"  {k:16s} {t * 1e3:8.2f} ms  {flops / t / 1e9:6.1f} GFLOP/s  "
              f"{base / t:5.2f}x the nn.Module loop")


def mlp_case(reps: int, widths: list[int], c: int = 20, b: int = 20) -> None:
    """The built-in stacked MLP against the same layers as an nn.Module loop."""
    model = build_model(ModelSpec(name="mlp", hidden=widths[1:-1]), widths[0], widths[-1],
                        widths[-1])
    layers: list[nn.Module] = []
    for a, o in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, o), nn.ReLU()]
    mod = nn.Sequential(*layers[:-1])
    g = torch.Generator().manual_seed(0)
    w = torch.stack([model.init(g) for _ in range(c)])
    x, y = torch.randn(c, b, widths[0]), torch.randint(0, widths[-1], (c, b))
    m = torch.full((c, b), 1.0 / b)
    fake = type("M", (), {"module": mod, "input_shape": (widths[0],), "sizes": [p.numel() for p in
                                                                          mod.parameters()]})
    paths = {"nn.Module loop": lambda: plain_loop(fake, w, x, y, m),
             "stacked Model": lambda: model.loss_grad(w, x, y, m)}
    best = {k: float("inf") for k in paths}
    for _ in range(reps):
        for k, f in paths.items():
            t = time.process_time()
            f()
            best[k] = min(best[k], time.process_time() - t)
    print(f"MLP {'-'.join(map(str, widths))}: {model.n_params} parameters")
    for k, t in best.items():
        print(f"  {k:16s} {t * 1e3:8.2f} ms  {best['nn.Module loop'] / t:5.2f}x the nn.Module loop")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    keep_freed_memory()     # as a run does (run_algorithm): blocks kept, no page faults
    case("FedAvg CNN, FEMNIST 28x28", ModelSpec(name="cnn"), (1, 28, 28), 62, 20, 20,
         max(1, a.reps // 2))
    case("digits CNN 8x8", ModelSpec(name="cnn", options={"channels": [8, 16], "dense": 32}),
         (1, 8, 8), 10, 20, 20, a.reps * 4)
    mlp_case(a.reps * 4, [784, 200, 200, 10])
    mlp_case(a.reps * 4, [64, 32, 10])
    case("char-LSTM", ModelSpec(name="char_lstm"), (80,), 80, 20, 10, max(1, a.reps // 2),
         text=True)


if __name__ == "__main__":
    main()
