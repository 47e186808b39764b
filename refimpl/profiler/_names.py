"""How the profiler names refimpl's ops: as torch names the aten op (PROF-100).

Most refimpl ops carry the aten name already (``add``, ``mm``, ``sum.dim_IntList``):
the profiler shows ``aten::`` and the name without its overload (``aten::sum``). The
tables below are the exceptions and the argument counts of torch's schemas; they are
data, so a new op needs a line here at most.
"""

from __future__ import annotations

# refimpl's private op names -> the aten op torch records for the same call
RENAMED = {
    "_index_fill_tensor": "index_fill",
    "_index_fill_tensor_": "index_fill_",
    "_masked_fill_tensor": "masked_fill",
    "_masked_fill_tensor_": "masked_fill_",
    "_scatter_reduce_src": "scatter_reduce",
    "_scatter_reduce_src_": "scatter_reduce_",
    "_scatter_reduce_value": "scatter_reduce",
    "_scatter_reduce_value_": "scatter_reduce_",
    "_scatter_value": "scatter",
    "_scatter_value_": "scatter_",
    "_squeeze_dim": "squeeze",
    "_squeeze_dim_": "squeeze_",
    "_squeeze_dims": "squeeze",
    "_squeeze_dims_": "squeeze_",
    "_view_dtype": "view",
    "_to_device": "_to_copy",
    # the one-op layer kernels: the aten op that does the same work in torch (its CPU
    # kernel's name where CUDA's differs: cuDNN's convolution and batch norm, the
    # attention backends); the linear forward as addmm (with a bias, the common case; mm
    # without), its backward as mm (torch's AddmmBackward0 runs two mm and a sum)
    "_batch_norm_fused": "native_batch_norm",
    "_batch_norm_fused_backward": "native_batch_norm_backward",
    "_conv_im2col": "_convolution",
    "_conv_im2col_backward": "convolution_backward",
    "_linear_fused": "addmm",
    "_linear_fused_backward": "mm",
    "_max_pool2d_fused": "max_pool2d_with_indices",
    "_max_pool2d_fused_backward": "max_pool2d_with_indices_backward",
    "_nll_loss_fused": "nll_loss_forward",
    "_nll_loss_fused_backward": "nll_loss_backward",
    "_layer_norm_fused": "native_layer_norm",
    "_layer_norm_fused_backward": "native_layer_norm_backward",
    "_softmax_backward_fused": "_softmax_backward_data",
    "_log_softmax_backward_fused": "_log_softmax_backward_data",
    "_gelu_backward_fused": "gelu_backward",
    "_sdpa_fused": "_scaled_dot_product_flash_attention_for_cpu",
    "_sdpa_fused_backward": "_scaled_dot_product_flash_attention_for_cpu_backward",
}

# Arguments in torch's schema of the overload a plain call picks (trailing defaults
# included): record_shapes lists one shape per schema argument, ``[]`` for non-tensors.
SCHEMA_ARITY = {
    "add": 3, "add_": 3, "sub": 3, "sub_": 3, "rsub": 3, "rsub.Scalar": 3,
    "mul": 2, "mul_": 2, "div": 2, "div_": 2, "div.Tensor_mode": 3, "div_.Tensor_mode": 3,
    "mm": 2, "bmm": 2, "addmm": 5, "mv": 2, "dot": 2,
    "sum": 2, "sum.dim_IntList": 4, "mean": 2, "mean.dim": 4, "prod": 2,
    "max.dim": 3, "min.dim": 3, "clone": 2, "copy_": 3, "pow": 2, "pow.Tensor_Scalar": 2,
    "masked_fill": 3, "_masked_fill_tensor": 3, "index_fill": 4, "_index_fill_tensor": 4,
    "scatter": 4, "_scatter_value": 4, "select": 3, "slice": 5, "index": 2, "t": 1,
    "split": 3, "unsqueeze": 2, "_squeeze_dim": 2, "view": 2, "_view_dtype": 2,
    "expand": 3, "linalg_vector_norm": 5, "linalg_cross": 3, "lerp.Scalar": 3,
    "lerp.Tensor": 3, "clamp.Tensor": 3, "unique_consecutive": 4, "relu": 1,
    "sigmoid": 1, "tanh": 1, "exp": 1, "neg": 1, "abs": 1, "sqrt": 1,
}


def profiler_name(op_name: str) -> str:
    """The event name of a refimpl op (``add`` -> ``aten::add``)."""
    base = op_name.split(".", 1)[0]
    return "aten::" + RENAMED.get(base, base)


def schema_arity(op_name: str) -> int:
    """How many arguments torch's schema of the op has (0 when not listed)."""
    return SCHEMA_ARITY.get(op_name, 0)
