"""Ops that torch's autocast lists name and refimpl lacked (spec AUTOCAST-020, NNF-*).

Each op is a composite of refimpl ops, so it runs on the CPU and on CUDA with the kernels
of the ops it is made of, and differentiates through them to any order. Each carries its
autocast policy under the name the lists give it (``refimpl._autocast.composite``):

- torch's top-level functions: ``addr`` (and ``Tensor.addr``/``addr_``), ``renorm``
  (and ``Tensor.renorm``/``renorm_``), ``chain_matmul``, ``conv_tbc``, the RNN cells
  (``rnn_tanh_cell``, ``rnn_relu_cell``, ``lstm_cell``, ``gru_cell``), ``cdist``,
  ``convolution``, ``_convolution``, ``cudnn_convolution(_transpose)``,
  ``native_layer_norm``, ``frobenius_norm``, ``Tensor.__div__``;
- ``upsample_*`` by name, as ``torch._C._nn`` spells them;
- ``linalg_vecdot`` and ``linalg_multi_dot``, as ``torch._C._linalg`` spells them.

``amp_list_aliases`` holds torch's top-level aliases of nn.functional ops and the
``torch._C._nn`` / ``torch._C._linalg`` namespaces.
"""

from __future__ import annotations

import warnings

from refimpl._autocast import composite
from refimpl._tensor import Tensor


def _F():
    from refimpl.nn import functional

    return functional


# -- matrix products --------------------------------------------------------------------

@composite("addr")
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1,
         out: Tensor | None = None) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)``; ``beta == 0`` ignores ``input``."""
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.dim() != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.dim()}-D")
    from refimpl import _dtype as D
    from refimpl.ops._pointwise import scalar_as

    if input.dtype is D.bool_:
        # boolean addr: (beta and input) or (alpha and outer(vec1, vec2))
        product = vec1.unsqueeze(1).logical_and(vec2.unsqueeze(0))
        result = product if alpha else product.logical_and(product.new_zeros(()))
        result = result.logical_or(input) if beta else result.logical_or(input.logical_and(
            input.new_zeros(())))
        return result if out is None else out.resize_(result.shape).copy_(result)
    # torch's kernel (CPU and CUDA): ``beta * self + alpha * vec1 * vec2`` evaluated left to
    # right in the dtype, with alpha and beta first converted to it (so float16 rounds
    # after each operation)
    dt = D.promote_types(D.promote_types(input.dtype, vec1.dtype), vec2.dtype)
    alpha, beta = scalar_as(alpha, dt), scalar_as(beta, dt)
    product = vec1.unsqueeze(1) * alpha * vec2.unsqueeze(0)
    if beta == 0:  # input only sets the shape: its NaNs and infs are not propagated
        input.expand(product.shape)
        result = product
    else:
        result = input * beta + product
    if out is not None:
        return out.resize_(result.shape).copy_(result)
    return result


def addr_(self: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """In-place ``addr`` into ``self``."""
    return self.copy_(addr(self, vec1, vec2, beta=beta, alpha=alpha))


_WARNED: list = []  # chain_matmul's deprecation warning was given


@composite("chain_matmul")
def chain_matmul(*matrices: Tensor, out: Tensor | None = None) -> Tensor:
    """The product of 2-D matrices (deprecated in torch for ``linalg.multi_dot``)."""
    from refimpl import linalg

    if not _WARNED:  # torch warns once per process (TORCH_WARN_ONCE)
        _WARNED.append(True)
        warnings.warn("torch.chain_matmul is deprecated and will be removed in a future "
                      "PyTorch release. Use torch.linalg.multi_dot instead, which accepts a "
                      "list of two or more tensors rather than multiple parameters.",
                      UserWarning, stacklevel=2)
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if len(matrices) == 0:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.dim() != 2:
            raise RuntimeError(f"Tensor dimension is {m.dim()}, expected 2 instead.")
    result = matrices[0].clone() if len(matrices) == 1 else linalg.multi_dot(matrices)
    if out is not None:
        return out.resize_(result.shape).copy_(result)
    return result


def linalg_vecdot(x: Tensor, y: Tensor, *, dim: int = -1, out: Tensor | None = None) -> Tensor:
    """``torch._C._linalg.linalg_vecdot``: ``linalg.vecdot`` (which carries the aten name's
    autocast policy) under its aten name."""
    from refimpl import linalg

    return linalg.vecdot(x, y, dim=dim, out=out)


def linalg_multi_dot(tensors, *, out: Tensor | None = None) -> Tensor:
    """``torch._C._linalg.linalg_multi_dot``: ``linalg.multi_dot`` (which carries the aten
    name's autocast policy) under its aten name."""
    from refimpl import linalg

    return linalg.multi_dot(tensors, out=out)


# -- norms -------------------------------------------------------------------------------

@composite("renorm")
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to it."""
    from refimpl import linalg
    from refimpl.ops.elementwise_binary import where

    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} "
                           "dimensions")
    dim = dim % input.dim()
    others = [d for d in range(input.dim()) if d != dim]
    norm = linalg.vector_norm(input.float() if input.dtype.itemsize < 4 else input, ord=p,
                              dim=others, keepdim=True)
    factor = where(norm > maxnorm, maxnorm / (norm + 1e-7), norm.new_ones(()))
    return (input * factor).to(input.dtype)


def renorm_(self: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """In-place ``renorm``."""
    return self.copy_(renorm(self, p, dim, maxnorm))


# -- convolutions under their aten names --------------------------------------------------

@composite("conv_tbc")
def conv_tbc(self: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """1-d convolution of a (time, batch, channel) input with a (width, in, out) weight."""
    if self.dim() != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.dim() != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, "
                           "out_channels.")
    if bias.dim() != 1:
        raise RuntimeError("Bias must be 1-D")
    if self.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    out = _F().conv1d(self.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1).contiguous()


@composite("convolution")
def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride, padding,
                dilation, transposed: bool, output_padding, groups: int) -> Tensor:
    """``torch.convolution``: a (transposed) N-d convolution, N from the weight."""
    F = _F()
    n = weight.dim() - 2
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1]
        return fn(input, weight, bias, list(stride), list(padding), list(output_padding),
                  groups, list(dilation))
    fn = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    return fn(input, weight, bias, list(stride), list(padding), list(dilation), groups)


@composite("_convolution")
def _convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride, padding,
                 dilation, transposed: bool, output_padding, groups: int, benchmark: bool,
                 deterministic: bool, cudnn_enabled: bool, allow_tf32: bool = True) -> Tensor:
    """``torch._convolution``: ``convolution`` with the backend flags (which refimpl's
    kernels do not need)."""
    return convolution(input, weight, bias, stride, padding, dilation, transposed,
                       output_padding, groups)


def _cuda_only(name: str, input: Tensor) -> None:
    if input.device.type != "cuda":
        raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the "
                                  f"'{input.device.type.upper()}' backend.")


@composite("cudnn_convolution")
def cudnn_convolution(self: Tensor, weight: Tensor, padding, stride, dilation, groups: int,
                      benchmark: bool, deterministic: bool, allow_tf32: bool) -> Tensor:
    """torch's cuDNN convolution entry point (CUDA only); refimpl computes the same
    convolution with its own kernels."""
    _cuda_only("cudnn_convolution", self)
    return convolution(self, weight, None, stride, padding, dilation, False,
                       [0] * len(padding), groups)


@composite("cudnn_convolution_transpose")
def cudnn_convolution_transpose(self: Tensor, weight: Tensor, padding, output_padding, stride,
                                dilation, groups: int, benchmark: bool, deterministic: bool,
                                allow_tf32: bool) -> Tensor:
    """torch's cuDNN transposed convolution entry point (CUDA only)."""
    _cuda_only("cudnn_convolution_transpose", self)
    return convolution(self, weight, None, stride, padding, dilation, True, output_padding,
                       groups)


# -- RNN cells ----------------------------------------------------------------------------

def _gates(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih, b_hh) -> tuple:
    F = _F()
    return F.linear(input, w_ih, b_ih), F.linear(hx, w_hh, b_hh)


@composite("rnn_tanh_cell")
def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                  b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    """``tanh(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)``."""
    gi, gh = _gates(input, hx, w_ih, w_hh, b_ih, b_hh)
    return (gi + gh).tanh()


@composite("rnn_relu_cell")
def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                  b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    """``relu(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)``."""
    gi, gh = _gates(input, hx, w_ih, w_hh, b_ih, b_hh)
    return (gi + gh).relu()


@composite("lstm_cell")
def lstm_cell(input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
              b_hh: Tensor | None = None) -> tuple:
    """One LSTM step: ``hx = (h, c)``; gates i, f, g, o; returns ``(h', c')``."""
    if len(hx) != 2:
        raise RuntimeError(f"lstm_cell: Expected hx to be a tuple of 2 tensors, got {len(hx)}")
    h, c = hx
    gi, gh = _gates(input, h, w_ih, w_hh, b_ih, b_hh)
    i, f, g, o = (gi + gh).chunk(4, 1)
    cy = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * cy.tanh(), cy


@composite("gru_cell")
def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
             b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    """One GRU step: reset and update gates, ``h' = n + z * (h - n)``."""
    gi, gh = _gates(input, hx, w_ih, w_hh, b_ih, b_hh)
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return n + z * (hx - n)


# -- upsampling by name ---------------------------------------------------------------

def _upsample(name: str, input: Tensor, n: int, output_size, scales, resample,
              align_corners: bool = False) -> Tensor:
    """Resample the last ``n`` dims to ``output_size``; ``scales`` (output/input per dim,
    None to use the sizes' ratio) as torch's upsample kernels take them. The ``.vec``
    form passes ``output_size=None`` and the scale factors."""
    import math

    from refimpl.ops import nn_sample

    if input.dim() != n + 2:
        raise RuntimeError(f"It is expected input_size equals to {n + 2}, but got size "
                           f"{input.dim()}")
    scales = list(scales) if scales is not None else [None] * n
    if output_size is None:
        output_size = [math.floor(s * f) for s, f in zip(input.shape[2:], scales)]
    sizes = [int(s) for s in output_size]
    if len(sizes) != n:
        raise RuntimeError(f"It is expected output_size equals to {n}, but got size "
                           f"{len(sizes)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"{name}" not implemented for \'{input.dtype._legacy}\'')
    mode = "bicubic" if resample == "cubic" else resample
    return nn_sample._resample(input, mode, sizes, scales, bool(align_corners))


@composite("upsample_nearest1d")
def upsample_nearest1d(input: Tensor, output_size, scales=None) -> Tensor:
    """Nearest-neighbour resampling of (N, C, L)."""
    return _upsample("upsample_nearest1d", input, 1, output_size,
                     scales if isinstance(scales, (list, tuple)) else [scales], "nearest")


@composite("upsample_nearest2d")
def upsample_nearest2d(input: Tensor, output_size, scales_h=None, scales_w=None) -> Tensor:
    """Nearest-neighbour resampling of (N, C, H, W)."""
    scales = scales_h if isinstance(scales_h, (list, tuple)) else [scales_h, scales_w]
    return _upsample("upsample_nearest2d", input, 2, output_size, scales, "nearest")


@composite("upsample_nearest3d")
def upsample_nearest3d(input: Tensor, output_size, scales_d=None, scales_h=None,
                       scales_w=None) -> Tensor:
    """Nearest-neighbour resampling of (N, C, D, H, W)."""
    scales = scales_d if isinstance(scales_d, (list, tuple)) else [scales_d, scales_h,
                                                                   scales_w]
    return _upsample("upsample_nearest3d", input, 3, output_size, scales, "nearest")


@composite("upsample_linear1d")
def upsample_linear1d(input: Tensor, output_size, align_corners: bool, scales=None) -> Tensor:
    """Linear resampling of (N, C, L)."""
    return _upsample("upsample_linear1d", input, 1, output_size,
                     scales if isinstance(scales, (list, tuple)) else [scales], "linear",
                     align_corners)


@composite("upsample_bilinear2d")
def upsample_bilinear2d(input: Tensor, output_size, align_corners: bool, scales_h=None,
                        scales_w=None) -> Tensor:
    """Bilinear resampling of (N, C, H, W)."""
    scales = scales_h if isinstance(scales_h, (list, tuple)) else [scales_h, scales_w]
    return _upsample("upsample_bilinear2d", input, 2, output_size, scales, "linear",
                     align_corners)


@composite("upsample_trilinear3d")
def upsample_trilinear3d(input: Tensor, output_size, align_corners: bool, scales_d=None,
                         scales_h=None, scales_w=None) -> Tensor:
    """Trilinear resampling of (N, C, D, H, W)."""
    scales = scales_d if isinstance(scales_d, (list, tuple)) else [scales_d, scales_h,
                                                                   scales_w]
    return _upsample("upsample_trilinear3d", input, 3, output_size, scales, "linear",
                     align_corners)


@composite("upsample_bicubic2d")
def upsample_bicubic2d(input: Tensor, output_size, align_corners: bool, scales_h=None,
                       scales_w=None) -> Tensor:
    """Bicubic resampling of (N, C, H, W)."""
    scales = scales_h if isinstance(scales_h, (list, tuple)) else [scales_h, scales_w]
    return _upsample("upsample_bicubic2d", input, 2, output_size, scales, "cubic",
                     align_corners)


@composite("_upsample_nearest_exact1d")
def _upsample_nearest_exact1d(input: Tensor, output_size, scales=None) -> Tensor:
    """Nearest-exact (pixel-centre) resampling of (N, C, L)."""
    return _upsample("_upsample_nearest_exact1d", input, 1, output_size,
                     scales if isinstance(scales, (list, tuple)) else [scales], "nearest-exact")


@composite("_upsample_nearest_exact2d")
def _upsample_nearest_exact2d(input: Tensor, output_size, scales_h=None,
                              scales_w=None) -> Tensor:
    """Nearest-exact resampling of (N, C, H, W)."""
    scales = scales_h if isinstance(scales_h, (list, tuple)) else [scales_h, scales_w]
    return _upsample("_upsample_nearest_exact2d", input, 2, output_size, scales,
                     "nearest-exact")


@composite("_upsample_nearest_exact3d")
def _upsample_nearest_exact3d(input: Tensor, output_size, scales_d=None, scales_h=None,
                              scales_w=None) -> Tensor:
    """Nearest-exact resampling of (N, C, D, H, W)."""
    scales = scales_d if isinstance(scales_d, (list, tuple)) else [scales_d, scales_h,
                                                                   scales_w]
    return _upsample("_upsample_nearest_exact3d", input, 3, output_size, scales,
                     "nearest-exact")


# -- layer norm's aten form and the deprecated Frobenius norm ------------------------------

@composite("native_layer_norm")
def native_layer_norm(input: Tensor, normalized_shape, weight: Tensor | None,
                      bias: Tensor | None, eps: float) -> tuple:
    """``(layer_norm(input), mean, rstd)``; mean and rstd keep the normalised dims as 1 and
    carry no gradient (torch's backward reads only the first output's)."""
    dims = list(range(input.dim() - len(normalized_shape), input.dim()))
    x = input.float() if input.dtype.itemsize == 2 else input
    mean = x.mean(dims, keepdim=True)
    rstd = ((x - mean) ** 2).mean(dims, keepdim=True).add(eps).rsqrt()
    return (_F().layer_norm(input, normalized_shape, weight, bias, eps), mean.detach(),
            rstd.detach())


@composite("frobenius_norm.dim")
def frobenius_norm(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """The 2-norm over ``dim`` (torch keeps it for TorchScript and warns)."""
    from refimpl import linalg

    warnings.warn("at::frobenius_norm is deprecated and it is just left for JIT compatibility. "
                  "It will be removed in a future PyTorch release. Please use "
                  "`linalg.vector_norm(A, 2., dim, keepdim)` instead", UserWarning,
                  stacklevel=2)
    return linalg.vector_norm(input, 2.0, dim, keepdim)


def __div__(self: Tensor, other) -> Tensor:
    """``Tensor.__div__``: the operator name torch's tensors keep from Python 2; true
    division, as ``/``."""
    from refimpl.ops.division import div

    return div(self, other)


TENSOR_METHODS = ("addr", "addr_", "renorm", "renorm_", "__div__")

__all__ = [
    "_convolution", "addr", "chain_matmul", "conv_tbc", "convolution",
    "cudnn_convolution", "cudnn_convolution_transpose", "frobenius_norm", "gru_cell",
    "lstm_cell", "native_layer_norm", "renorm", "rnn_relu_cell", "rnn_tanh_cell",
]
