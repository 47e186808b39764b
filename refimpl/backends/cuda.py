"""``refimpl.backends.cuda``: the matmul flags, read by refimpl's cuBLAS products."""

from __future__ import annotations

from refimpl.backends import _precision


class _MatmulFlags:
    """``allow_tf32`` is a view of the float32 matmul precision ('highest' means False)."""

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        """Whether float32 matmuls may use TF32."""
        return _precision.get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        _precision.set_float32_matmul_precision("high" if value else "highest")


matmul = _MatmulFlags()


def is_built() -> bool:
    """Whether refimpl can run CUDA (cuda-python importable)."""
    from refimpl.cuda import _driver

    return _driver.bindings_available()


def __getattr__(name: str):
    # the cuFFT plan caches live with the cuFFT code, imported on first use
    if name == "cufft_plan_cache":
        from refimpl.cuda._cufft import cufft_plan_cache

        return cufft_plan_cache
    raise AttributeError(f"module 'refimpl.backends.cuda' has no attribute '{name}'")
