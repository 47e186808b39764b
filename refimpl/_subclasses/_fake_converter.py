"""Real tensors to fake tensors, memoised weakly (spec: FAKE-005, FAKE-006, FAKE-007).

The converter remembers, per real tensor, the fake made for it and, per real storage, the
fake storage standing for it, as long as both are alive: converting the same tensor twice gives the same fake, and
tensors sharing storage (views, ``set_``) get fakes sharing one fake storage even when they
are converted separately. Both memos hold both sides weakly: an entry disappears when
its real tensor (or storage) or its fake dies. The memos are keyed by ``id`` with a weak
reference beside it, because tensors compare elementwise and cannot be dictionary keys of
a ``WeakKeyDictionary``.
"""

from __future__ import annotations

import weakref

from refimpl._tensor import Tensor


class _WeakIdMemo:
    """``id(obj) -> value`` entries held weakly on both sides: an entry vanishes when its
    key or its value is garbage-collected (the memo never keeps a fake, and so its mode,
    alive: no reference cycle through the mode)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple] = {}

    def get(self, obj):
        entry = self._entries.get(id(obj))
        if entry is not None and entry[0]() is obj:
            return entry[1]()
        return None

    def set(self, obj, value) -> None:
        key = id(obj)
        entries = self._entries

        def forget(ref, key=key) -> None:
            current = entries.get(key)
            if current is not None and (current[0] is ref or current[1] is ref):
                del entries[key]

        entries[key] = (weakref.ref(obj, forget), weakref.ref(value, forget))

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, obj) -> bool:
        return self.get(obj) is not None


class MetaConverter:
    """Holds the storage memo (torch keeps it on its meta converter)."""

    def __init__(self) -> None:
        self.storage_memo = _WeakIdMemo()


class FakeTensorConverter:
    """Converts real (and meta) tensors into fakes of a mode, memoised weakly."""

    def __init__(self) -> None:
        self.tensor_memo = _WeakIdMemo()
        self.meta_converter = MetaConverter()

    def _fake_storage(self, mode, storage, fake_device):
        from refimpl._subclasses.fake_tensor import FakeStorage

        memo = self.meta_converter.storage_memo
        fs = memo.get(storage)
        if fs is None:
            fs = FakeStorage.make(storage.nbytes(), fake_device, mode)
            memo.set(storage, fs)
        return fs

    def _convert(self, mode, t: Tensor, fake_device) -> Tensor:
        memo = self.tensor_memo.get(t)
        if memo is not None:
            return memo
        base = None
        if t._base is not None:
            base = self._convert(mode, t._base, fake_device)
        fs = self._fake_storage(mode, t._storage, fake_device)
        out = Tensor._make(fs, t._shape, t._stride, t._offset, t.dtype, base=base)
        out._is_inference = t._is_inference
        if t.requires_grad and base is None:
            out._rg = True
        grad = t.grad if t.is_leaf else None
        if grad is not None:
            out.grad = self._convert(mode, grad, fake_device)
        self.tensor_memo.set(t, out)
        return out

    def from_real_tensor(self, fake_mode, t: Tensor, make_constant: bool = False):
        """The fake of ``t`` in ``fake_mode`` (the same object for the same ``t``).

        It keeps shape, strides, offset, dtype, device, ``requires_grad``, inference-ness,
        a converted ``.grad`` and storage sharing with other converted tensors.
        """
        from refimpl._subclasses.fake_tensor import FakeTensor

        if isinstance(t, FakeTensor):
            if t.fake_mode is fake_mode:
                return t
            raise AssertionError(
                f"Mixing fake modes NYI x.fake_mode={t.fake_mode} vs self={fake_mode}")
        if t.is_quantized:
            from refimpl._subclasses.fake_tensor import UnsupportedFakeTensorException

            raise UnsupportedFakeTensorException("quantized nyi in meta tensors")
        out = self._convert(fake_mode, t, t._storage.device)
        if getattr(t, "_is_param", False) and t._base is None:
            out._is_param = True  # the fake of an nn.Parameter is one (not of its views)
        if make_constant and t.numel() <= 1 and t._storage.device.type == "cpu":
            fake_mode._set_constant(out, t)
        return out

    def from_meta_and_device(self, fake_mode, t: Tensor, device):
        """A fake on ``device`` with the metadata of the meta tensor ``t`` (memoised)."""
        from refimpl._subclasses._fake_impls import normalize_device

        if t.device.type != "meta":
            raise AssertionError(f"tensor's device must be `meta`, got {t.device.type} instead")
        memo = self.tensor_memo.get(t)
        if memo is not None:
            return memo
        fs = self._fake_storage(fake_mode, t._storage, normalize_device(device))
        out = Tensor._make(fs, t._shape, t._stride, t._offset, t.dtype)
        self.tensor_memo.set(t, out)
        return out
