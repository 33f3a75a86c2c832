"""Feature skew (`data.shift`): the images of one group (a client, or the clients of one edge)
share a shift, applied once to its training and test rows after the split.

With G groups (clients, or edges: a client's first edge, `Topology.edge_of`):

- rotate: R > 0: group g's images are turned by theta_g ~ U(-R, R) degrees (drawn from the
  scenario seed and the name "data/shift", group g), bilinear, the frame kept, corners 0.
- noise: s > 0: group g adds N(0, sigma_g^2) per pixel with sigma_g = s * g / (G - 1) (group 0
  clean, the last the noisiest: NIID-Bench's noise-based feature skew, x + N(0, s i / N)), on
  the [0, 1] pixel scale, drawn per client ("data/shift-noise", client); uint8 pixels are
  rounded and clipped to 0..255, float pixels clipped to [0, 1].

The same seed gives the same shift; the defaults (0, 0) leave the data untouched."""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import seeding
from .federated import FederatedData


def group_angles(rotate: float, n_groups: int, seed: int) -> np.ndarray:
    """theta_g ~ U(-rotate, rotate) degrees per group g."""
    return np.array([seeding.rng(seed, "data/shift", g).uniform(-rotate, rotate)
                     for g in range(n_groups)])


def group_noise(noise: float, n_groups: int) -> np.ndarray:
    """sigma_g = noise * g / (G - 1) (one group: noise)."""
    return noise * (np.arange(n_groups) / max(n_groups - 1, 1) if n_groups > 1 else np.ones(1))


def _shift_rows(x: np.ndarray, shape: tuple[int, ...], angle: float, sd: float,
                g: np.random.Generator) -> np.ndarray:
    if not len(x):
        return x
    scale = 255.0 if x.dtype == np.uint8 else 1.0
    img = x.reshape(len(x), *shape).astype(np.float64)
    if angle:
        from scipy.ndimage import rotate as nd_rotate

        img = nd_rotate(img, angle, axes=(-1, -2), reshape=False, order=1, mode="constant")
    if sd:
        img = img + g.normal(0.0, sd * scale, img.shape)
    img = np.clip(img, 0.0, scale)
    out = np.rint(img) if x.dtype == np.uint8 else img
    return out.astype(x.dtype).reshape(len(x), -1)


def apply_shift(data: FederatedData, spec, edge_of: np.ndarray, seed: int) -> FederatedData:
    """`data` (numpy) with each client's rows shifted by its group's rotation and noise
    (the module's doc); `data` itself when the shift is none."""
    if not spec.rotate and not spec.noise:
        return data
    n = data.n_clients
    group = np.arange(n) if spec.by == "client" else np.asarray(edge_of, np.int64)
    n_groups = int(group.max()) + 1 if n else 0
    angles = group_angles(spec.rotate, n_groups, seed) if spec.rotate else np.zeros(n_groups)
    sds = group_noise(spec.noise, n_groups) if spec.noise else np.zeros(n_groups)
    shape = tuple(data.input_shape)          # (channels, height, width) of the image sets
    if len(shape) == 2:
        shape = (1, *shape)
    elif len(shape) < 2:                     # rows that are not images: noise only
        shape = (1, 1, data.dim)
    x, xt = np.array(data.x), np.array(data.x_test)
    for k in range(n):
        gk = int(group[k])
        g = seeding.rng(seed, "data/shift-noise", k)
        for arr, off in ((x, data.offsets), (xt, data.test_offsets)):
            a, b = int(off[k]), int(off[k + 1])
            arr[a:b] = _shift_rows(arr[a:b], shape, float(angles[gk]), float(sds[gk]), g)
    return dataclasses.replace(data, x=x, x_test=xt)
