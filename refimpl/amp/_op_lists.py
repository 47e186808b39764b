"""Autocast's op lists, as data: which ops run in which precision (spec AUTOCAST-020..026).

The lists follow torch 2.13's registrations for the ``AutocastCUDA`` and ``AutocastCPU``
dispatch keys. Names are op names as refimpl's registry spells them, which is torch's
``name`` or ``name.overload`` with two exceptions: refimpl's ``pow`` is torch's
``pow.Tensor_Tensor``, and refimpl's ``softmax``/``log_softmax`` are torch's ``.int``
overloads. A name that refimpl does not define yet is harmless here: the op joins its
list the moment it is defined under that name (an op defined with ``defop`` or a
composite function decorated with ``refimpl._autocast.composite``).

Policies (what the autocast layer does to the floating-point tensor arguments that live
on the autocast device; float64 arguments are never touched):

``lower_precision_fp``
    cast to the autocast dtype (``get_autocast_dtype(device)``) and run.
``fp32``
    cast to float32 and run.
``fp32_set_opt_dtype``
    when the first argument is eligible and no ``dtype=`` was given, run in float32.
``fp32_append_dtype``
    run in float32 with the output dtype float32 when the first argument is eligible
    (torch's ``norm`` overloads without a dtype).
``promote``
    run in the widest floating type among the eligible arguments (float32 wins over the
    autocast dtype; a float16/bfloat16 mix that is not the autocast dtype is an error).
``banned``
    raise the op's message: running it under autocast is unsafe.
"""

from __future__ import annotations

# Matrix products, convolutions and cells: Tensor Cores / low-precision GEMMs pay off.
_CUDA_LOWER = """
_convolution _convolution.deprecated conv1d conv2d conv3d conv_tbc conv_transpose1d
conv_transpose2d.input conv_transpose3d.input convolution prelu addmm addmv addr matmul
einsum mm mv linalg_vecdot linear addbmm baddbmm bmm chain_matmul linalg_multi_dot
_thnn_fused_lstm_cell _thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell
_scaled_dot_product_flash_attention scaled_dot_product_attention cudnn_convolution
cudnn_convolution_transpose
"""

# Ops whose range or accumulation needs float32.
_CUDA_FP32 = """
acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan
pow.Tensor_Scalar pow pow.Scalar softplus layer_norm native_layer_norm group_norm
frobenius_norm.dim nuclear_norm nuclear_norm.dim cosine_similarity poisson_nll_loss
cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div l1_loss
smooth_l1_loss huber_loss mse_loss margin_ranking_loss multilabel_margin_loss
soft_margin_loss triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits
dist pdist cdist renorm logsumexp upsample_nearest1d _upsample_nearest_exact1d
upsample_nearest2d _upsample_nearest_exact2d upsample_nearest3d _upsample_nearest_exact3d
upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa upsample_trilinear3d
upsample_bicubic2d _upsample_bicubic2d_aa
"""

_CUDA_FP32_SET_OPT_DTYPE = """
prod prod.dim_int prod.dim_Dimname softmax softmax.Dimname log_softmax log_softmax.Dimname
cumprod cumprod.dimname cumsum cumsum.dimname linalg_vector_norm linalg_matrix_norm
linalg_matrix_norm.str_ord sum sum.dim_IntList sum.dim_DimnameList
"""

_CUDA_FP32_APPEND_DTYPE = "norm norm.Scalar norm.ScalarOpt_dim norm.names_ScalarOpt_dim"

_CUDA_PROMOTE = """
addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add
"""

_CPU_LOWER = """
conv1d conv1d.padding conv2d conv2d.padding conv3d conv3d.padding bmm mm linalg_vecdot
baddbmm addmm _addmm_activation addbmm linear _convolution.deprecated matmul conv_tbc
mkldnn_rnn_layer conv_transpose1d conv_transpose2d.input conv_transpose3d.input prelu
scaled_dot_product_attention _native_multi_head_attention
"""

_CPU_FP32 = """
avg_pool3d binary_cross_entropy grid_sampler polar prod prod.dim_int prod.dim_Dimname
quantile quantile.scalar nanquantile nanquantile.scalar stft stft.center cdist
grid_sampler_2d _grid_sampler_2d_cpu_fallback grid_sampler_3d trace view_as_complex
cholesky cholesky_inverse cholesky_solve inverse lu_solve orgqr ormqr pinverse max_pool3d
max_unpool2d max_unpool3d adaptive_avg_pool3d reflection_pad1d reflection_pad2d
replication_pad1d replication_pad2d replication_pad3d mse_loss cosine_embedding_loss
nll_loss nll_loss2d hinge_embedding_loss poisson_nll_loss smooth_l1_loss
cross_entropy_loss l1_loss huber_loss margin_ranking_loss soft_margin_loss
triplet_margin_loss multi_margin_loss ctc_loss.IntList ctc_loss.Tensor kl_div
multilabel_margin_loss binary_cross_entropy_with_logits fft_fft fft_ifft fft_fft2
fft_ifft2 fft_fftn fft_ifftn fft_rfft fft_irfft fft_rfft2 fft_irfft2 fft_rfftn fft_irfftn
fft_hfft fft_ihfft linalg_cond linalg_cond.p_str linalg_matrix_rank
linalg_matrix_rank.tol_tensor linalg_matrix_rank.atol_rtol_tensor
linalg_matrix_rank.atol_rtol_float linalg_solve linalg_cholesky linalg_svdvals
linalg_eigvals linalg_eigvalsh linalg_inv linalg_householder_product linalg_tensorinv
linalg_tensorsolve fake_quantize_per_tensor_affine geqrf _lu_with_info qr svd
triangular_solve fractional_max_pool2d fractional_max_pool3d adaptive_max_pool3d
multilabel_margin_loss_forward linalg_qr linalg_cholesky_ex linalg_svd linalg_eig
linalg_eigh linalg_lstsq linalg_inv_ex
"""

_CPU_PROMOTE = "stack cat index_copy index_copy.dimname"

BCE_BANNED = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using "
    "torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits "
    "are\nsafe to autocast."
)

# policy -> device type -> op names
POLICIES: dict[str, dict[str, frozenset]] = {
    "lower_precision_fp": {"cuda": frozenset(_CUDA_LOWER.split()),
                           "cpu": frozenset(_CPU_LOWER.split())},
    "fp32": {"cuda": frozenset(_CUDA_FP32.split()), "cpu": frozenset(_CPU_FP32.split())},
    "fp32_set_opt_dtype": {"cuda": frozenset(_CUDA_FP32_SET_OPT_DTYPE.split()),
                           "cpu": frozenset()},
    "fp32_append_dtype": {"cuda": frozenset(_CUDA_FP32_APPEND_DTYPE.split()),
                          "cpu": frozenset()},
    "promote": {"cuda": frozenset(_CUDA_PROMOTE.split()), "cpu": frozenset(_CPU_PROMOTE.split())},
}

# device type -> ops on none of its lists that torch decomposes there (CompositeImplicit,
# no autocast kernel), so autocast sees the ops they are made of: cross_entropy is
# log_softmax (float32) and nll_loss (float32) under CUDA autocast; multi_dot is mm's
# (lower precision) under CPU autocast
DECOMPOSED: dict[str, frozenset] = {"cuda": frozenset({"cross_entropy_loss"}),
                                    "cpu": frozenset({"linalg_multi_dot"})}

# device type -> op name -> the RuntimeError message raised instead of running the op
BANNED: dict[str, dict[str, str]] = {"cuda": {"binary_cross_entropy": BCE_BANNED}, "cpu": {}}


def policy_of(device_type: str, name: str) -> str | None:
    """The cast policy of op ``name`` under ``device_type`` autocast, or None."""
    if name in BANNED.get(device_type, {}):
        return "banned"
    for policy, per_device in POLICIES.items():
        if name in per_device.get(device_type, ()):
            return policy
    return None


def all_names() -> frozenset:
    """Every op name that some device's autocast treats specially (the dispatcher's filter)."""
    names: set = set()
    for per_device in POLICIES.values():
        for ops in per_device.values():
            names |= ops
    for ops in BANNED.values():
        names |= set(ops)
    return frozenset(names)
