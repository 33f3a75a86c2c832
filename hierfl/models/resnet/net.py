"""The ResNets' torch modules and factory; declaration and options: the package's __init__.py."""
from __future__ import annotations

from torch import nn
from torch.nn import functional as F

from ..cnn.net import image_shape
from ..registry import ModelOptionError

DEPTHS = (8, 20, 32, 56, 18)
NORMS = ("batch", "group", "none")


def norm_options(norm: object, groups: object) -> None:
    """Refuse a `norm` or `groups` option a model does not take, naming the key."""
    if norm not in NORMS:
        raise ModelOptionError("norm", f"norm must be one of {', '.join(NORMS)}, not {norm!r}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ModelOptionError("groups", f"groups must be a positive integer, not {groups!r}")


def norm_layer(norm: str, channels: int, groups: int) -> nn.Module:
    """BatchNorm2d, GroupNorm(groups) or nothing (Identity) over `channels` channels;
    `groups` must divide the channels (refused naming `groups`)."""
    if norm == "batch":
        return nn.BatchNorm2d(channels)
    if norm == "group":
        if channels % groups:
            raise ModelOptionError("groups", f"groups ({groups}) must divide every layer's "
                                   f"channels; {channels} is not a multiple")
        return nn.GroupNorm(groups, channels)
    return nn.Identity()


def widths(base: tuple[int, ...], width: object) -> list[int]:
    """The channels of each stage times `width` (rounded, at least 1)."""
    if isinstance(width, bool) or not isinstance(width, (int, float)) or not 0 < width <= 64:
        raise ModelOptionError("width", f"width must be a number in (0, 64], not {width!r}")
    return [max(1, round(c * width)) for c in base]


def conv3x3(c_in: int, c_out: int, stride: int, bias: bool) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=bias)


class PadShortcut(nn.Module):
    """Option A: the input subsampled by `stride` and zero-padded from c_in to c_out channels
    (no parameters)."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.extra, self.stride = c_out - c_in, stride

    def forward(self, x):
        x = x[:, :, ::self.stride, ::self.stride]
        return F.pad(x, (0, 0, 0, 0, 0, self.extra)) if self.extra else x


class BasicBlock(nn.Module):
    """relu(norm(conv(relu(norm(conv(x))))) + shortcut(x)), two 3x3 convolutions."""

    def __init__(self, c_in: int, c_out: int, stride: int, norm: str, groups: int,
                 shortcut: str):
        super().__init__()
        bias = norm == "none"
        self.conv1 = conv3x3(c_in, c_out, stride, bias)
        self.norm1 = norm_layer(norm, c_out, groups)
        self.conv2 = conv3x3(c_out, c_out, 1, bias)
        self.norm2 = norm_layer(norm, c_out, groups)
        if stride == 1 and c_in == c_out:
            self.shortcut: nn.Module = nn.Identity()
        elif shortcut == "A":
            if c_out < c_in:
                raise ModelOptionError("shortcut", "shortcut A cannot narrow the channels")
            self.shortcut = PadShortcut(c_in, c_out, stride)
        else:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=bias),
                                          norm_layer(norm, c_out, groups))

    def forward(self, x):
        out = F.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """stem (3x3 convolution, norm, ReLU), stages of basic blocks, global average pooling,
    dense output. Inputs (B, C, H, W), or flat (B, C*H*W) / (B, H, W) rows reshaped."""

    def __init__(self, image: tuple[int, int, int], stages: list[tuple[int, int, int]],
                 stem: int, num_classes: int, norm: str, groups: int, shortcut: str):
        super().__init__()
        self.image = image
        c_in = image[0]
        self.conv1 = conv3x3(c_in, stem, 1, norm == "none")
        self.norm1 = norm_layer(norm, stem, groups)
        blocks, c_in = [], stem
        for c_out, n, stride in stages:
            for i in range(n):
                blocks.append(BasicBlock(c_in, c_out, stride if i == 0 else 1, norm, groups,
                                         shortcut))
                c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x):
        x = x.reshape(x.shape[0], *self.image)
        x = F.relu(self.norm1(self.conv1(x)))
        x = self.blocks(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def resnet(input_shape: tuple[int, ...], num_classes: int, depth: int = 20,
           norm: str = "batch", groups: int = 2, width: float = 1.0,
           shortcut: str | None = None) -> nn.Module:
    if depth not in DEPTHS or isinstance(depth, bool):
        raise ModelOptionError("depth", f"depth must be one of {', '.join(map(str, DEPTHS))}, "
                               f"not {depth!r}")
    norm_options(norm, groups)
    shortcut = ("B" if depth == 18 else "A") if shortcut is None else shortcut
    if shortcut not in ("A", "B"):
        raise ModelOptionError("shortcut", f"shortcut must be A or B, not {shortcut!r}")
    if depth == 18:
        chans = widths((64, 128, 256, 512), width)
        stages = [(c, 2, 1 if i == 0 else 2) for i, c in enumerate(chans)]
    else:
        chans = widths((16, 32, 64), width)
        stages = [(c, (depth - 2) // 6, 1 if i == 0 else 2) for i, c in enumerate(chans)]
    return ResNet(image_shape(input_shape), stages, chans[0], num_classes, norm, groups,
                  shortcut)
