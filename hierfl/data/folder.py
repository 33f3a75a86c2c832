"""Images from a local folder laid out as torchvision's ImageFolder: `root/<class>/<image>`.

The classes are the sorted names of root's subfolders (label i: the i-th name, as ImageFolder
numbers them); a class folder's images are its files (in its subfolders too) whose names end
in an image extension (.png .jpg .jpeg .bmp .ppm .pgm .tif .tiff .webp, any case), taken in
sorted path order; other files are skipped. Images are read with Pillow, turned to grayscale
(one channel: `transform.grayscale`, or when every image is grayscale already) or RGB (three),
resized to `transform.resize: [H, W]` (bilinear) if asked, and kept as uint8 rows, channels
first (C, H, W) like CIFAR's, so batches are scaled x / 255 (`learn.batches.model_input`).

The training rows are split over the clients by `data.partition` (data/partitions.py). With
`test:` (another tree of the same classes) its images are the test set, dealt to clients class
by class in proportion to their training rows (as MNIST's); without it each client holds out
`test_fraction` of its rows (as digits'). A folder that is not there, a class folder without
images, an image Pillow cannot read or one of another size (without resize) is a
DataFileError naming it (exit 2)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import seeding
from ..config.errors import ScenarioError
from ..config.fields import each, positive, spec
from ..config.schema import HeldOut, Partitioned
from .federated import FederatedData, offsets_of, split_train_test
from .files import DataFileError
from .images import client_problem, deal_test_rows
from .partitions import PartitionError, partition
from .registry import DatasetFacts, Found, declare_dataset

if TYPE_CHECKING:
    from ..config.schema import Scenario

EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")
GRAY_MODES = ("1", "L", "LA", "I", "I;16", "F", "P;L")
MAX_SIDE = 4096                 # resize: a side longer than this is refused (resource guard)


def _side(v: int) -> str | None:
    return positive(v) or (None if v <= MAX_SIDE else f"must be <= {MAX_SIDE} (resource guard)")


def _pair(v: list[int]) -> str | None:
    return None if len(v) == 2 else f"must be [height, width], got {len(v)} numbers"


@dataclass(frozen=True)
class TransformSpec:
    resize: list[int] | None = spec(None, "image_folder: [height, width] every image is "
                                    "resized to (bilinear); none: every image must have one "
                                    "size", check=lambda v: _pair(v) or each(_side)(v))
    grayscale: bool = spec(False, "image_folder: one channel (luminance) instead of RGB "
                           "(without it: one channel when every image is grayscale)")


@declare_dataset("image_folder", code=f"{__name__}:load_folder", summary=(
    "Your own images, an ImageFolder tree (root: holds one folder per class, classes "
    "numbered in sorted name order, of PNG/JPEG/... images), read with Pillow and split over "
    "the clients by partition:. The test set: test: (a tree of the same classes), else "
    "test_fraction of each client's rows."),
    facts=DatasetFacts(files="root", more_files=("test",),
                       check=lambda s, b, n: folder_problems(s, b, n)))
@dataclass(frozen=True)
class ImageFolderSpec(HeldOut, Partitioned):
    """An ImageFolder tree of PNG/JPEG images, one subfolder per class."""

    root: str | None = spec(None, "image_folder: the tree root/<class>/<image> (relative to "
                            "the scenario)")
    test: str | None = spec(None, "image_folder: a tree of test images of the same classes "
                            "(relative to the scenario); none: each client holds out "
                            "test_fraction of its rows")
    transform: TransformSpec = spec(default_factory=TransformSpec,
                                    doc="image_folder: how the images are read")


# ------------------------------------------------------------------------------ the tree
def scan(root: str, classes: list[str] | None = None) -> tuple[list[str], list[str], np.ndarray]:
    """(class names, image paths, labels) of the tree at root; with `classes` (the training
    tree's), its class folders must be among them and are labelled by them."""
    if os.path.isfile(root):
        raise DataFileError(root, "is a file, not a folder: image_folder reads a folder of "
                            "class folders")
    if not os.path.isdir(root):
        raise DataFileError(root, "no such folder")
    names = sorted(e.name for e in os.scandir(root)
                   if e.is_dir() and not e.name.startswith("."))
    if not names:
        raise DataFileError(root, "holds no class folders (root/<class>/<image>.png)")
    known = names if classes is None else classes
    for n in names:
        if n not in known:
            raise DataFileError(os.path.join(root, n), f"a class the training tree does not "
                                f"have (its classes: {', '.join(known)})")
    paths, labels = [], []
    for n in names:
        found = []
        for d, subdirs, files in os.walk(os.path.join(root, n), followlinks=True):
            subdirs.sort()
            found += [os.path.join(d, f) for f in sorted(files)
                      if f.lower().endswith(EXTENSIONS) and not f.startswith(".")]
        if not found:
            raise DataFileError(os.path.join(root, n), f"a class folder with no images "
                                f"({' '.join(EXTENSIONS)})")
        paths += found
        labels += [known.index(n)] * len(found)
    return names, paths, np.asarray(labels, np.int64)


def folder_problems(spec: ImageFolderSpec, base_dir: str, n_clients: int | None) -> Found:
    """No root:, a tree that is not there or has an empty class, too few images."""
    if not spec.root:
        return [("data.root", None, "image_folder needs root: (the folder of class folders)")]
    try:
        classes, paths, _ = scan(os.path.join(base_dir, spec.root))
        if spec.test:
            scan(os.path.join(base_dir, spec.test), classes)
    except DataFileError as exc:
        key = "data.test" if spec.test and exc.path.startswith(
            os.path.join(base_dir, spec.test)) else "data.root"
        return [(key, spec.test if key == "data.test" else spec.root,
                 f"{exc.path}: {exc.message}")]
    bad = client_problem(spec, len(paths), n_clients) if n_clients is not None else None
    return [bad] if bad else []


def read_images(paths: list[str], t: TransformSpec, gray: bool | None = None
                ) -> tuple[np.ndarray, tuple[int, int, int]]:
    """uint8 rows (n, C * H * W), channels first, and (C, H, W). gray: None decides from the
    images (grayscale when asked or when every image is)."""
    from PIL import Image, UnidentifiedImageError

    errors = (OSError, ValueError, UnidentifiedImageError, Image.DecompressionBombError)
    opened = []
    for p in paths:
        try:
            with Image.open(p) as im:
                im.load()
                opened.append(im.copy())
        except errors as exc:
            raise DataFileError(p, f"not an image Pillow can read ({exc})") from None
    if gray is None:
        gray = t.grayscale or all(im.mode in GRAY_MODES for im in opened)
    c = 1 if gray else 3
    size = (t.resize[1], t.resize[0]) if t.resize else opened[0].size   # Pillow: (W, H)
    out = np.empty((len(paths), c * size[1] * size[0]), np.uint8)
    for i, (p, im) in enumerate(zip(paths, opened)):
        if im.size != size and not t.resize:
            raise DataFileError(p, f"is {im.size[0]} x {im.size[1]} pixels (width x height), "
                                f"{paths[0]} {size[0]} x {size[1]}: give transform: "
                                f"{{resize: [H, W]}} to read images of different sizes")
        try:
            im = im.convert("L" if gray else "RGB")
            if im.size != size:
                im = im.resize(size, Image.BILINEAR)
            a = np.asarray(im, np.uint8)
        except errors as exc:
            raise DataFileError(p, f"cannot convert ({exc})") from None
        out[i] = (a[None] if gray else a.transpose(2, 0, 1)).reshape(-1)
    return out, (c, size[1], size[0])


# ------------------------------------------------------------------------------ loading
def load_folder(sc: "Scenario", n_clients: int) -> FederatedData:
    spec: ImageFolderSpec = sc.data                 # type: ignore[assignment]
    return image_folder(spec, n_clients, sc.seed, spec.root or "", spec.test, sc.file)


def image_folder(spec: ImageFolderSpec, n_clients: int, seed: int, root: str,
                 test: str | None, file: str = "") -> FederatedData:
    """The tree at root split over the clients (test: the test tree's path or None)."""
    classes, paths, y = scan(root)
    bad = client_problem(spec, len(paths), n_clients)
    if bad:
        raise ScenarioError.one(file, *bad)
    x, shape = read_images(paths, spec.transform)
    k = len(classes)
    try:
        parts = partition(y, n_clients, spec.partition, seeding.rng(seed, "data/partition"))
    except PartitionError as exc:
        raise ScenarioError.one(file, *exc.triple()) from None
    if test is None:
        train, held = [], []            # row indices (from_arrays would make floats)
        for c, rows in enumerate(parts):
            tr, te = split_train_test(rows, rows, spec.test_fraction,
                                      seeding.rng(seed, "data/split", c))
            train.append(tr[0])
            held.append(te[0])
        order, torder = np.concatenate(train), np.concatenate(held)
        return FederatedData(x[order], y[order], offsets_of(train), x[torder], y[torder],
                             offsets_of(held), k, shape)
    _, tpaths, y_test = scan(test, classes)
    x_test, tshape = read_images(tpaths, spec.transform, gray=shape[0] == 1)
    if tshape != shape:
        raise DataFileError(tpaths[0], f"is {tshape[2]} x {tshape[1]} pixels, the training "
                            f"images {shape[2]} x {shape[1]}: give transform: "
                            "{resize: [H, W]}")
    tparts = deal_test_rows(parts, y, y_test, k, seeding.rng(seed, "data/test-split"))
    order, torder = np.concatenate(parts), np.concatenate(tparts)
    return FederatedData(x[order], y[order], offsets_of(parts), x_test[torder], y_test[torder],
                         offsets_of(tparts), k, shape)
