"""Process-wide switches of the fake-tensor machinery (torch's ``torch._functorch.config``).

``fake_tensor_allow_meta``: whether a fake tensor may simulate the ``meta`` device
(spec: FAKE-202). When False, making one raises AssertionError.
"""

fake_tensor_allow_meta: bool = True
