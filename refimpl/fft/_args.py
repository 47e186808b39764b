"""Argument rules shared by the transforms of ``refimpl.fft``: dims and signal sizes,
norm modes, dtype promotion, resizing the input, and ``out=``.

Each helper raises torch's exception type and message for the mistake it catches.
"""

from __future__ import annotations

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops.fft import BY_N, BY_ROOT_N, NONE, complex_of


def wrap(dim: int, ndim: int) -> int:
    """``dim`` made non-negative; a 0-dim tensor has no dims to transform."""
    if ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return wrap_dim(int(dim), ndim)


def norm_mode(norm: str | None, forward: bool) -> int:
    """torch's ``fft_norm_mode`` for ``norm`` on a transform in that direction."""
    if norm is None or norm == "backward":
        return NONE if forward else BY_N
    if norm == "forward":
        return BY_N if forward else NONE
    if norm == "ortho":
        return BY_ROOT_N
    raise RuntimeError(f'Invalid normalization mode: "{norm}"')


def promote(x: Tensor, require_complex: bool) -> Tensor:
    """``x`` in the dtype a transform computes in: integers and bools in the default
    float dtype, float32/float64 as they are (complex when ``require_complex``).

    Half precision exists only in cuFFT (torch's CPU raises), bfloat16 nowhere; a half
    input is returned as it is, for ``check_half``.
    """
    dt = x.dtype
    if dt.is_complex:
        return x
    target = dt if dt.is_floating_point else D.get_default_dtype()
    on_gpu = x.device.type in ("cuda", "meta")
    if not (target in (D.float32, D.float64) or (target is D.float16 and on_gpu)):
        raise RuntimeError(f"Unsupported dtype {D.type_name(target)}")
    if target is D.float16:
        return x  # check_half then raises: refimpl has no complex32 to promote to
    if require_complex:
        target = complex_of(target)
    return x if target is dt else x.to(target)


def check_half(x: Tensor, sizes) -> None:
    """Half precision on CUDA: cuFFT takes power-of-two signal sizes only; refimpl has no
    complex32 tensors, so the transform itself is not available."""
    if x.dtype not in (D.float16, D.complex32):
        return
    if any(n & (n - 1) for n in sizes):
        raise RuntimeError(
            "cuFFT only supports dimensions whose sizes are powers of two when computing in "
            f"half precision, but got a signal size of[{', '.join(str(n) for n in sizes)}]")
    raise NotImplementedError(
        "half-precision FFTs produce complex32 (ComplexHalf) tensors, which refimpl does not "
        "implement")


def check_points(n: int) -> None:
    """A signal of ``n`` points, ``n >= 1``."""
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")


def shape_and_dims(x: Tensor, s, dim) -> tuple[list[int], list[int]]:
    """The signal sizes and the dims of an n-dimensional transform.

    ``dim`` defaults to the last ``len(s)`` dims when ``s`` is given, else to every dim;
    ``s`` defaults to the input's sizes, and ``-1`` in ``s`` keeps a dim's size.
    """
    ndim = x.dim()
    dims: list[int] = []
    if dim is not None:
        dim = [dim] if isinstance(dim, int) else list(dim)
        dims = [wrap(d, ndim) for d in dim]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is not None:
        s = [s] if isinstance(s, int) else list(s)
        if dim is not None and len(dim) != len(s):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
        if len(s) > ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                               f"{ndim} dimensions.")
        if dim is None:
            dims = list(range(ndim - len(s), ndim))
        sizes = [x._shape[d] if int(n) == -1 else int(n) for d, n in zip(dims, s)]
    else:
        if dim is None:
            dims = list(range(ndim))
        sizes = [x._shape[d] for d in dims]
    for n in sizes:
        check_points(n)
    return sizes, dims


def resize(x: Tensor, dims, sizes) -> Tensor:
    """``x`` cut or zero-padded at the end of each of ``dims`` to ``sizes``."""
    from refimpl.nn.functional import pad

    pads = [0] * (2 * x.dim())
    for d, n in zip(dims, sizes):
        have = x._shape[d]
        if n < have:
            x = x.narrow(d, 0, n)
        elif n > have:
            pads[2 * (x.dim() - 1 - d) + 1] = n - have
    if any(pads):
        x = pad(x, pads)
    return x


def check_out(fname: str, out: Tensor | None, complex_out: bool) -> None:
    """An ``out=`` tensor of the right kind (complex or real floating)."""
    if out is None:
        return
    if complex_out and not out.dtype.is_complex:
        raise RuntimeError(f"{fname} expects a complex output tensor, but got "
                           f"{D.type_name(out.dtype)}")
    if not complex_out and not out.dtype.is_floating_point:
        raise RuntimeError(f"{fname} expects a floating point output tensor, but got "
                           f"{D.type_name(out.dtype)}")


def conj_into(result: Tensor, out: Tensor | None) -> Tensor:
    """The conjugate of a fresh transform: lazily, or physically into ``out``."""
    if out is None:
        return result.conj()
    return out.conj_physical_()
