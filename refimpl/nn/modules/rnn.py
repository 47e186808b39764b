"""RNN, LSTM, GRU (spec NN-180): torch's parameter names, shapes and initialisation,
layers and directions, ``batch_first``, unbatched inputs, LSTM projections; the cells are
written in refimpl ops (one time step after another), so autograd and every device come
from the ops."""

from __future__ import annotations

import math
import numbers
import warnings

from refimpl import _dispatch
from refimpl._tensor import Tensor
from refimpl.nn import functional as F
from refimpl.nn import init
from refimpl.nn.modules.linear import empty_param
from refimpl.nn.modules.module import Module

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _stack(tensors: list[Tensor], dim: int) -> Tensor:
    from refimpl.ops.shape import stack

    return stack(tensors, dim)


class RNNBase(Module):
    """Layers x directions of one recurrent cell type (``mode``)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        gate_size = _GATES[mode] * hidden_size
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + suffix, empty_param(*shape, device=device,
                                                             dtype=dtype))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        std = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -std, std)

    @property
    def all_weights(self) -> list[list[Tensor]]:
        """The parameters of each layer and direction, in registration order."""
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional
                                                                   else 1))
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]]
                for i in range(0, len(names), per)]

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # -- the recurrence ----------------------------------------------------------------

    def _weights(self, layer: int, direction: int) -> dict:
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        return {k: getattr(self, k + suffix, None)
                for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")}

    def _cell(self, x: Tensor, state, w: dict):
        gi = F.linear(x, w["weight_ih"], w["bias_ih"])
        if self.mode == "LSTM":
            h, c = state
            gates = gi + F.linear(h, w["weight_hh"], w["bias_hh"])
            i, f, g, o = gates.chunk(4, -1)
            c = f.sigmoid() * c + i.sigmoid() * g.tanh()
            h = o.sigmoid() * c.tanh()
            if w["weight_hr"] is not None:
                h = F.linear(h, w["weight_hr"])
            return h, (h, c)
        h = state
        gh = F.linear(h, w["weight_hh"], w["bias_hh"])
        if self.mode == "GRU":
            ir, iz, in_ = gi.chunk(3, -1)
            hr, hz, hn = gh.chunk(3, -1)
            r = (ir + hr).sigmoid()
            z = (iz + hz).sigmoid()
            n = (in_ + r * hn).tanh()
            h = (1 - z) * n + z * h
        else:
            pre = gi + gh
            h = pre.tanh() if self.mode == "RNN_TANH" else pre.relu()
        return h, h

    def _run(self, input: Tensor, h0: Tensor, c0: Tensor | None):
        """input (L, N, *) and initial states (layers * directions, N, *)."""
        directions = 2 if self.bidirectional else 1
        steps = input.shape[0]
        layer_input = input
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                k = layer * directions + direction
                w = self._weights(layer, direction)
                state = (h0[k], c0[k]) if self.mode == "LSTM" else h0[k]
                order = range(steps - 1, -1, -1) if direction == 1 else range(steps)
                out = [None] * steps
                for step in order:
                    out[step], state = self._cell(layer_input[step], state, w)
                outputs.append(_stack(out, 0))
                if self.mode == "LSTM":
                    h_n.append(state[0])
                    c_n.append(state[1])
                else:
                    h_n.append(state)
            layer_input = outputs[0] if directions == 1 else _cat(outputs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        h = _stack(h_n, 0)
        return layer_input, (h, _stack(c_n, 0)) if self.mode == "LSTM" else h

    def forward(self, input: Tensor, hx=None):
        """(output, h_n) — LSTM: (output, (h_n, c_n))."""
        batched = input.dim() == 3
        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.dim()}D tensor instead")
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        directions = 2 if self.bidirectional else 1
        batch = input.shape[1]
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is None:
            from refimpl.ops.factories import zeros

            opts = {"dtype": input.dtype, "device": input.device}
            h0 = zeros(self.num_layers * directions, batch, real_hidden, **opts)
            c0 = (zeros(self.num_layers * directions, batch, self.hidden_size, **opts)
                  if self.mode == "LSTM" else None)
        elif self.mode == "LSTM":
            h0, c0 = hx
            if not batched:
                h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
        else:
            h0, c0 = (hx if batched else hx.unsqueeze(1)), None
        profiler = _dispatch.PROFILE_LAYER  # a running profiler records aten::lstm etc.
        if profiler is not None:
            output, hidden = profiler.composite(_ATEN_NAMES[self.mode], self._run,
                                                (input, h0, c0), {})
        else:
            output, hidden = self._run(input, h0, c0)
        if not batched:
            output = output.squeeze(1)
            hidden = ((hidden[0].squeeze(1), hidden[1].squeeze(1)) if self.mode == "LSTM"
                      else hidden.squeeze(1))
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, hidden


# torch's op names of the recurrent layers (what a profile shows)
_ATEN_NAMES = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu"}


def _cat(tensors: list[Tensor], dim: int) -> Tensor:
    from refimpl.ops.shape import cat

    return cat(tensors, dim)


class RNN(RNNBase):
    """Elman RNN: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o), optionally with a projection."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)
