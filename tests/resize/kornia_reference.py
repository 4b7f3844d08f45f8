"""A torch reference of kornia.geometry.transform.resize(x, size, interpolation="bilinear", align_corners=None,
antialias=True), the resize of LightGlue's SuperPoint preprocessing, written from kornia's code so the tests need
no kornia (kornia is not a dependency of this project):

- geometry/transform/affwarp.py resize: factors = (h / out_h, w / out_w); blur only when max(factors) > 1 with
  sigma = max((factor - 1) / 2, 0.001) per axis and kernel size int(max(2.0 * 2 * sigma, 3)) made odd;
- filters/gaussian.py gaussian_blur2d (separable): sigma as a tensor of the input dtype, kernels from
  filters/kernels.py gaussian: x = arange(k) - k // 2, exp(-x^2 / (2 sigma^2)) / sum; the x kernel first, then the
  y kernel, each after F.pad(mode="reflect") by k // 2 (filter2d with an odd kernel);
- torch.nn.functional.interpolate(mode="bilinear", align_corners=None -> False), here written out with tensor
  ops as torch >= 2.0's CPU kernel computes it (aten/src/ATen/native/UpSample.h, compute_source_index_and_lambda):
  the source position scale * (d + 0.5) - 0.5 in float32. Debian 12's torch 1.13 computes that position in double,
  which moves the weights by up to half a float ulp of the position (3e-5 near 1000), so F.interpolate there differs
  from the torch that LightGlue users run; bilinear_torch2() is checked against F.interpolate within 1e-4 only.

Also the size rule of resize(x, side_size, side="long"): _side_to_image_size with Python's int() truncation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def gaussian_kernel1d(k: int, sigma: torch.Tensor) -> torch.Tensor:
    x = torch.arange(k, dtype=sigma.dtype) - k // 2
    g = torch.exp(-x.pow(2.0) / (2 * sigma.pow(2.0)))
    return g / g.sum(-1, keepdim=True)


def _filter_1d(x: torch.Tensor, kernel: torch.Tensor, axis: int) -> torch.Tensor:
    """Reflect-padded correlation of a (1, 1, H, W) tensor with a 1-D kernel along W (axis=-1) or H (axis=-2)."""
    r = kernel.numel() // 2
    if axis == -1:
        x = F.pad(x, (r, r, 0, 0), mode="reflect")
        w = kernel.view(1, 1, 1, -1)
    else:
        x = F.pad(x, (0, 0, r, r), mode="reflect")
        w = kernel.view(1, 1, -1, 1)
    return F.conv2d(x, w.to(x.dtype))


def gaussian_blur2d(x: torch.Tensor, ks: tuple[int, int], sigmas: tuple[float, float]) -> torch.Tensor:
    sigma = torch.tensor([sigmas], dtype=x.dtype)  # (1, 2): (sigma_y, sigma_x), in the input's dtype as kornia
    kernel_x = gaussian_kernel1d(ks[1], sigma[:, 1].view(1, 1))
    kernel_y = gaussian_kernel1d(ks[0], sigma[:, 0].view(1, 1))
    return _filter_1d(_filter_1d(x, kernel_x, -1), kernel_y, -2)


def resize_antialias(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """kornia resize of a (B, C, H, W) float tensor to size = (out_h, out_w), bilinear, antialias=True."""
    h, w = x.shape[-2:]
    if tuple(size) == (h, w):
        return x
    factors = (h / size[0], w / size[1])
    if max(factors) > 1:
        sigmas = (max((factors[0] - 1.0) / 2.0, 0.001), max((factors[1] - 1.0) / 2.0, 0.001))
        ks = [int(max(2.0 * 2 * sigmas[0], 3)), int(max(2.0 * 2 * sigmas[1], 3))]
        ks = [k + 1 if k % 2 == 0 else k for k in ks]
        x = gaussian_blur2d(x, (ks[0], ks[1]), sigmas)
    return bilinear_torch2(x, (int(size[0]), int(size[1])))


def _axis(n_in: int, n_out: int):
    """Indices and weights of one axis: torch >= 2.0's compute_source_index_and_lambda (float32, no scale)."""
    if n_in == n_out:
        i = torch.arange(n_out)
        return i, i, torch.ones(n_out), torch.zeros(n_out)
    scale = torch.tensor(n_in, dtype=torch.float32) / n_out
    real = (scale * (torch.arange(n_out, dtype=torch.float32) + 0.5) - 0.5).clamp(min=0)
    i0 = real.to(torch.int64).clamp(max=n_in - 1)
    i1 = i0 + (i0 < n_in - 1).to(torch.int64)
    l1 = (real - i0.to(torch.float32)).clamp(0, 1)
    return i0, i1, 1 - l1, l1


def bilinear_torch2(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """F.interpolate(x, size, mode="bilinear", align_corners=False) of a (B, C, H, W) float32 tensor as torch >= 2.0:
    wy0 * (wx0 * x[y0, x0] + wx1 * x[y0, x1]) + wy1 * (wx0 * x[y1, x0] + wx1 * x[y1, x1])."""
    h, w = x.shape[-2:]
    y0, y1, wy0, wy1 = _axis(h, size[0])
    x0, x1, wx0, wx1 = _axis(w, size[1])

    def row(yi: torch.Tensor) -> torch.Tensor:
        r = x.index_select(-2, yi)
        return wx0 * r.index_select(-1, x0) + wx1 * r.index_select(-1, x1)

    return wy0[:, None] * row(y0) + wy1[:, None] * row(y1)


def long_side_size(w: int, h: int, side: int) -> tuple[int, int]:
    """_side_to_image_size(side, w / h, "long") as (out_w, out_h)."""
    aspect = w / h
    if aspect < 1.0:  # ("long" == "short") ^ (aspect < 1): the height is the long side
        return int(side * aspect), side
    return side, int(side / aspect)
