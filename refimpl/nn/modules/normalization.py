"""BatchNorm1d/2d/3d, LayerNorm, GroupNorm, RMSNorm (spec NN-120..).

BatchNorm keeps ``running_mean``/``running_var``/``num_batches_tracked`` buffers and
follows torch's momentum rule (``momentum=None``: cumulative average); the math is F's.
"""

from __future__ import annotations

import numbers

from refimpl._tensor import Tensor
from refimpl.nn import functional as F
from refimpl.nn import init
from refimpl.nn.modules.linear import empty_param
from refimpl.nn.modules.module import Module
from refimpl.ops.nn_norm import count_batch


def _tensor_factory(kind: str, *shape, device=None, dtype=None, **kwargs) -> Tensor:
    from refimpl.ops import factories

    return getattr(factories, kind)(*shape, device=device, dtype=dtype, **kwargs)


class _NormBase(Module):
    """Parameters and running statistics shared by the batch norms."""

    _version = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = empty_param(num_features, device=device, dtype=dtype)
            if bias:
                self.bias = empty_param(num_features, device=device, dtype=dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _tensor_factory(
                "zeros", num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", _tensor_factory(
                "ones", num_features, device=device, dtype=dtype))
            from refimpl._dtype import int64

            self.register_buffer("num_batches_tracked", _tensor_factory(
                "tensor", 0, device=device, dtype=int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Zero mean, unit variance, no batches tracked."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Running stats reset; weight 1, bias 0."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return ("{num_features}, eps={eps}, momentum={momentum}, affine={affine}, "
                "bias={use_bias}, track_running_stats={track_running_stats}".format(
                    **self.__dict__, use_bias=self.bias is not None))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                from refimpl._dtype import int64

                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked
                                   is not None and self.num_batches_tracked.device.type != "meta"
                                   else _tensor_factory("tensor", 0, dtype=int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        """Normalise with batch statistics (training or no running stats) or running ones."""
        self._check_input_dim(input)
        # each attribute read once: buffers and parameters go through Module.__getattr__
        momentum, training = self.momentum, self.training
        factor = 0.0 if momentum is None else momentum
        if training and self.track_running_stats:
            counter = self.num_batches_tracked
            if counter is not None:
                count_batch(counter)
                if momentum is None:
                    factor = 1.0 / float(counter)
        running_mean, running_var = self.running_mean, self.running_var
        use_batch_stats = training or (running_mean is None and running_var is None)
        track = not training or self.track_running_stats
        return F.batch_norm(input, running_mean if track else None,
                            running_var if track else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)


def _dim_checker(name: str, allowed: tuple[int, ...], wording: str):
    def check(self, input: Tensor) -> None:
        if input.dim() not in allowed:
            raise ValueError(f"expected {wording} input (got {input.dim()}D input)")
    check.__name__ = name
    return check


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L)."""

    _check_input_dim = _dim_checker("_check_input_dim", (2, 3), "2D or 3D")


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W)."""

    _check_input_dim = _dim_checker("_check_input_dim", (4,), "4D")


class BatchNorm3d(_BatchNorm):
    """Batch norm over (N, C, D, H, W)."""

    _check_input_dim = _dim_checker("_check_input_dim", (5,), "5D")


def _shape(normalized_shape) -> tuple[int, ...]:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(normalized_shape)



def _affine_params(module: Module, shape, affine: bool, bias: bool, device, dtype) -> None:
    """The ``weight`` (and ``bias``) of ``shape`` of an affine normalisation, or both
    registered as None."""
    if affine:
        module.weight = empty_param(*shape, device=device, dtype=dtype)
        if bias:
            module.bias = empty_param(*shape, device=device, dtype=dtype)
            return
    else:
        module.register_parameter("weight", None)
    module.register_parameter("bias", None)


def _reset_affine(module: Module, affine: bool) -> None:
    """Weight 1 and bias 0 of an affine normalisation."""
    if affine:
        init.ones_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)

class LayerNorm(Module):
    """Normalise over the last ``len(normalized_shape)`` dims, with an affine map."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_params(self, self.normalized_shape, elementwise_affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight 1, bias 0."""
        _reset_affine(self, self.elementwise_affine)

    def forward(self, input: Tensor) -> Tensor:
        """``F.layer_norm``."""
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return ("{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}, "
                "bias={use_bias}".format(**self.__dict__, use_bias=self.bias is not None))


class GroupNorm(Module):
    """Normalise each of ``num_groups`` channel groups, with a per-channel affine map."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_params(self, (num_channels,), affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight 1, bias 0."""
        _reset_affine(self, self.affine)

    def forward(self, input: Tensor) -> Tensor:
        """``F.group_norm``."""
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return ("{num_groups}, {num_channels}, eps={eps}, affine={affine}, "
                "bias={use_bias}".format(**self.__dict__, use_bias=self.bias is not None))


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dims."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = empty_param(*self.normalized_shape, device=device, dtype=dtype)
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight 1."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        """``F.rms_norm``."""
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return ("{normalized_shape}, eps={eps}, "
                "elementwise_affine={elementwise_affine}".format(**self.__dict__))


class _InstanceNorm(_NormBase):
    _no_batch_dims = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        """Normalise each sample and channel over its own spatial positions."""
        import warnings

        self._check_input_dim(input)
        feature_dim = input.dim() - self._no_batch_dims
        if input.size(feature_dim) != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.size(feature_dim)}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You "
                          "can silence this warning by not passing in num_features, which is "
                          "not used because affine=False", stacklevel=2)
        unbatched = input.dim() == self._no_batch_dims
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over (N, C, L) or (C, L)."""

    _no_batch_dims = 2
    _check_input_dim = _dim_checker("_check_input_dim", (2, 3), "2D or 3D")


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over (N, C, H, W) or (C, H, W)."""

    _no_batch_dims = 3
    _check_input_dim = _dim_checker("_check_input_dim", (3, 4), "3D or 4D")


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over (N, C, D, H, W) or (C, D, H, W)."""

    _no_batch_dims = 4
    _check_input_dim = _dim_checker("_check_input_dim", (4, 5), "4D or 5D")


class LocalResponseNorm(Module):
    """Normalise each channel by the activity of its ``size`` neighbours."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        """``F.local_response_norm``."""
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)
