"""The short-time Fourier transform and its inverse: ``stft``, ``istft``
(spec TENSOR-FFT-004).

Both are composites, as in torch: ``stft`` cuts the (optionally reflect-padded) signal
into overlapping frames (``unfold``), multiplies them by the window and transforms each
frame with ``_fft_r2c``/``_fft_c2c``; ``istft`` inverts each frame with
``_fft_c2r``/``_fft_c2c``, windows it again and overlap-adds the frames (``index_add``),
dividing by the overlap-added squared window. They run on every device the ops run on
and differentiate through them. Arguments, defaults, warnings and error messages are
torch's (its messages repeat the call, as ``stft(torch.FloatTensor[28], n_fft=8, ...)``).
"""

from __future__ import annotations

import warnings

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops.fft import BY_N, BY_ROOT_N, NONE, _fft_c2c, _fft_c2r, _fft_r2c

__all__ = ["istft", "stft"]
TENSOR_METHODS = ("istft", "stft")

_NO_WINDOW_STFT = (
    "A window was not provided. A rectangular window will be applied,which is known to "
    "cause spectral leakage. Other windows such as torch.hann_window or torch.hamming_window "
    "are recommended to reduce spectral leakage.To suppress this warning and use a "
    "rectangular window, explicitly set `window=torch.ones(n_fft, device=<device>)`.")
_NO_WINDOW_ISTFT = (
    "A window was not provided. A rectangular window will be applied.Please provide the "
    "same window used by stft to make the inversion lossless.To suppress this warning and "
    "use a rectangular window, explicitly set `window=torch.ones(n_fft, device=<device>)`.")
_REAL_OUTPUT = (
    "stft with return_complex=False is deprecated. In a future pytorch release, stft will "
    "return complex tensors for all inputs, and return_complex=False will raise an error.\n"
    "Note: you can still call torch.view_as_real on the complex output to recover the old "
    "return format.")
_PADDED = (
    "The length of signal is shorter than the length parameter. Result is being padded with "
    "zeros in the tail. Please check your center and hop_length settings.")

_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """torch's TORCH_WARN_ONCE: once per process unless ``set_warn_always(True)``."""
    import refimpl

    if message in _warned and not refimpl.is_warn_always_enabled():
        return
    _warned.add(message)
    warnings.warn(message, UserWarning, stacklevel=3)


def _opt(value) -> str:
    if value is None:
        return "None"
    return str(int(value)) if isinstance(value, bool) else str(value)


def _sizes(shape) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def _window_repr(window: Tensor | None) -> str:
    return "None" if window is None else f"{window.type()}{{{_sizes(window.shape)}}}"


def _options_name(x: Tensor) -> str:
    """``CPUComplexFloatType``: the backend and scalar type, as torch prints options."""
    return f"{x.device.type.upper()}{D.type_name(x.dtype)}Type"


def _real_dtype(dtype: D.dtype) -> D.dtype:
    return {"complex64": D.float32, "complex128": D.float64}.get(dtype.name, dtype)


def _centered(window: Tensor, n_fft: int) -> Tensor:
    """``window`` zero-padded on both sides to ``n_fft`` points, centred."""
    from refimpl.nn.functional import pad

    left = (n_fft - window.shape[0]) // 2
    return pad(window, [left, n_fft - window.shape[0] - left])


# -- stft --------------------------------------------------------------------------------

def stft(input: Tensor, n_fft: int, hop_length: int | None = None,
         win_length: int | None = None, window: Tensor | None = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None, align_to_window: bool | None = None) -> Tensor:
    """The short-time Fourier transform of a 1-D signal or a batch of them (2-D):
    ``(freq, frames)`` (``(batch, freq, frames)``) of frames ``hop_length`` apart
    (default ``n_fft // 4``), each ``n_fft`` samples times ``window`` (``win_length``
    points, default ``n_fft``, zero-padded to ``n_fft`` in the middle; none: a
    rectangular window). ``center`` pads ``n_fft // 2`` on both sides with ``pad_mode``;
    ``onesided`` (default for real input and window) keeps ``n_fft // 2 + 1``
    frequencies; ``normalized`` scales by ``1/sqrt(n_fft)``."""
    from refimpl.nn.functional import pad
    from refimpl.ops.views_dtype import view_as_real

    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    hop = n_fft >> 2 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    shown = list(input.shape)
    if center and shown:
        shown[-1] += 2 * (n_fft // 2)

    def fail(what: str):
        raise RuntimeError(
            f"stft({input.type()}{_sizes(shown)}, n_fft={n_fft}, hop_length={hop}, "
            f"win_length={win}, window={_window_repr(window)}, normalized={_opt(normalized)}, "
            f"onesided={_opt(onesided)}, return_complex={_opt(return_complex)}, "
            f"align_to_window={_opt(align_to_window)}) : {what}")

    if window is not None and window.device != input.device:
        raise RuntimeError("stft input and window must be on the same device but got self on "
                           f"{input.device} and window on {window.device}")
    if window is None:
        _warn_once(_NO_WINDOW_STFT)
    complex_out = return_complex
    if complex_out is None:
        complex_out = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if not complex_out:
        if return_complex is None:
            raise RuntimeError(
                "stft requires the return_complex parameter be given for real inputs, and "
                "will further require that return_complex=True in a future PyTorch release.")
        _warn_once(_REAL_OUTPUT)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        fail("expected a tensor of floating point or complex values")
    if input.dim() not in (1, 2):
        fail("expected a 1D or 2D tensor")
    x = input if input.dim() == 2 else input.unsqueeze(0)
    if center:
        half = n_fft // 2
        x = pad(x.unsqueeze(0), [half, half], pad_mode).squeeze(0)
    elif align_to_window and win < n_fft:
        left = (n_fft - win) // 2
        x = pad(x, [left, n_fft - win - left])
    length = x.shape[1]
    if n_fft <= 0 or n_fft > length:
        fail(f"expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop <= 0:
        fail(f"expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        fail(f"expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        fail(f"expected a 1D window tensor of size equal to win_length={win}, but got window "
             f"with size {_sizes(window.shape)}")
    frames = x.unfold(-1, n_fft, hop)  # (batch, n_frames, n_fft)
    if window is not None or win < n_fft:
        if window is None:
            from refimpl.ops.factories import ones

            window = ones(win, dtype=_real_dtype(x.dtype), device=x.device)
        frames = frames * (_centered(window, n_fft) if win < n_fft else window)
    complex_fft = frames.dtype.is_complex
    onesided = (not complex_fft) if onesided is None else onesided
    mode = BY_ROOT_N if normalized else NONE
    if complex_fft:
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        out = _fft_c2c(frames, [2], mode, True)
    else:
        out = _fft_r2c(frames, [2], mode, onesided)
    out = out.transpose(1, 2)
    if input.dim() == 1:
        out = out.squeeze(0)
    return out if complex_out else view_as_real(out)


# -- istft -------------------------------------------------------------------------------

def _overlap_add(frames: Tensor, total: int, hop: int) -> Tensor:
    """Sum frames ``(channels, n_frames, n_fft)`` placed ``hop`` apart into
    ``(channels, total)``."""
    from refimpl.ops.factories import arange, zeros

    channels, n_frames, n_fft = frames.shape
    starts = arange(n_frames, device=frames.device) * hop
    index = (starts.unsqueeze(1) + arange(n_fft, device=frames.device).unsqueeze(0))
    out = zeros(channels, total, dtype=frames.dtype, device=frames.device)
    return out.index_add(1, index.reshape(-1), frames.reshape(channels, n_frames * n_fft))


def _check_dims(input: Tensor) -> None:
    """The frame and frequency dims (-2 and -3 of the real view) exist."""
    real_dims = input.dim() + 1
    for d in (-2, -3):
        if real_dims < -d:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-real_dims}, {real_dims - 1}], but got {d})")


def istft(input: Tensor, n_fft: int, hop_length: int | None = None,
          win_length: int | None = None, window: Tensor | None = None, center: bool = True,
          normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Tensor:
    """The inverse of ``stft`` (``return_complex=True`` output, ``(freq, frames)`` or
    ``(batch, freq, frames)``) by overlap-add; give the window and settings ``stft``
    used. ``length`` trims (or zero-pads) the signal."""
    from refimpl.nn.functional import pad

    hop = n_fft >> 2 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length

    def fail(what: str, sep: str = " : "):
        raise RuntimeError(
            f"istft({_options_name(input)}{_sizes(input.shape)}, n_fft={n_fft}, "
            f"hop_length={hop}, win_length={win}, window={_window_repr(window)}, "
            f"center={_opt(center)}, normalized={_opt(normalized)}, onesided={_opt(onesided)}, "
            f"length={_opt(length)}, return_complex={_opt(return_complex)}){sep}{what}")

    if window is None:
        _warn_once(_NO_WINDOW_ISTFT)
    if not input.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor matching the output "
                           "from stft with return_complex=True.")
    _check_dims(input)
    n_frames, fft_size = input.shape[-1], input.shape[-2]
    expected = n_fft + hop * (n_frames - 1)
    if input.numel() == 0:
        fail("input tensor cannot be empty.")
    if input.dim() not in (2, 3):
        fail("expected a tensor with 3 or 4 dimensions of complex dtype, but got "
             f"{input.dim() + 1}")
    onesided_ = fft_size != n_fft if onesided is None else onesided
    if onesided_ and n_fft // 2 + 1 != fft_size:
        fail("expected the frequency dimension (3rd to the last) of the input tensor to match "
             f"n_fft / 2 + 1 when onesided=True, but got {fft_size}")
    if not onesided_ and n_fft != fft_size:
        fail("expected the frequency dimension (3rd to the last) of the input tensor to match "
             f"n_fft when onesided=False, but got {fft_size}")
    if not 0 < hop <= win:
        fail("expected 0 < hop_length <= win_length")
    if not 0 < win <= n_fft:
        fail("expected 0 < win_length <= n_fft")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        fail("Invalid window shape. window has to be 1D and length of `win_length`")
    w = window
    if w is None:
        from refimpl.ops.factories import ones

        w = ones(win, dtype=_real_dtype(input.dtype), device=input.device)
    if win != n_fft:
        w = _centered(w, n_fft)
    x = (input if input.dim() == 3 else input.unsqueeze(0)).transpose(1, 2)
    mode = BY_ROOT_N if normalized else BY_N
    if return_complex:
        if onesided_:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        x = _fft_c2c(x, [2], mode, False)
    else:
        if window is not None and window.dtype.is_complex:
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not onesided_:
            x = x.narrow(-1, 0, n_fft // 2 + 1)
        x = _fft_c2r(x, [2], mode, n_fft)
    y = _overlap_add(x * w.view(1, 1, n_fft), expected, hop)
    envelope = _overlap_add(w.pow(2).expand(1, n_frames, n_fft), expected, hop)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = -(n_fft // 2) if center else expected
    y, envelope = y[:, start:end], envelope[:, start:end]
    if bool((envelope.abs().min() < 1e-11).item()):
        fail(f"1\n[ {input.device.type.upper()}BoolType{{}} ]", " window overlap add min: ")
    y = y / envelope
    if input.dim() == 2:
        y = y.squeeze(0)
    if end > expected:
        _warn_once(_PADDED)
        y = pad(y, [0, end - expected])
    return y
