"""The in-memory form of a conformance case after validation and parameter expansion.

Everything here is plain data (picklable and cheap to send to worker processes).
The YAML shape is described in ``conformance/FORMAT.md``; ``conformance/schema.py``
turns YAML into these objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"
XFAILED = "xfailed"
XPASSED = "xpassed"
ERROR = "error"
OUTCOMES = (PASSED, FAILED, SKIPPED, XFAILED, XPASSED, ERROR)

#: Dtype names a case may use; each is an attribute of the target module.
DTYPES = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)

#: Check kinds, in the order FORMAT.md lists them.
CHECK_KINDS = (
    "value",
    "true",
    "same_storage",
    "is",
    "raises",
    "warns",
    "no_warnings",
    "memory",
)

#: ``source`` values that name no seed test.
NON_SEED_SOURCES = ("research", "spec", "selftest")


@dataclass(frozen=True, slots=True)
class Requires:
    """What a case needs from the target before it can run (else it is skipped)."""

    cuda: bool = False
    gpus: int = 0
    torch: str | None = None
    targets: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One deterministic input: a numpy array built from a seed, then a target tensor."""

    name: str
    kind: str  # randn | rand | randint | value
    args: Any  # shape, (low, high, shape) or a literal
    dtype: str
    requires_grad: bool = False
    device: str = "cpu"
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class ExcSpec:
    """An expected exception (``type``) or warning (``category``) with a regex."""

    type: str
    match: str | None = None
    count: int | None = None  # warnings only: exactly this many matching warnings


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation: its kind, the file line it came from and its fields."""

    kind: str
    line: int
    data: dict[str, Any]

    @property
    def label(self) -> str:
        """A short human name, such as ``value: out``."""
        head = self.data.get(self.kind)
        if isinstance(head, tuple):
            head = "[" + ", ".join(head) + "]"
        if self.kind in ("raises", "warns", "memory"):
            head = self.data.get("eval") or "program"
        return f"{self.kind}: {head}"


@dataclass(slots=True)
class Case:
    """A runnable case: one combination of a YAML case's parameters."""

    id: str
    base_id: str
    area: str
    path: str
    line: int
    program: str
    program_line: int
    source: str | tuple[str, ...] = "research"
    spec: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    requires: Requires = field(default_factory=Requires)
    xfail: str | dict[str, str] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[InputSpec, ...] = ()
    expect: tuple[Check, ...] = ()
    raises: ExcSpec | None = None
    warns: ExcSpec | None = None
    timeout: float | None = None
    # runs alone, after the other cases (device-wide memory use or accounting)
    exclusive: bool = False

    @property
    def device(self) -> str:
        """The device type this case runs on (``cpu`` or ``cuda``)."""
        device = self.params.get("device")
        if isinstance(device, str):
            return device.split(":")[0]
        return "cuda" if self.requires.cuda else "cpu"

    @property
    def sources(self) -> tuple[str, ...]:
        """``source`` as a tuple (a case may cite several seed tests)."""
        return (self.source,) if isinstance(self.source, str) else tuple(self.source)

    @property
    def source_text(self) -> str:
        """``source`` as one line of text."""
        return ", ".join(self.sources)

    @property
    def location(self) -> str:
        """``path:line`` of the case's ``id``."""
        return f"{self.path}:{self.line}"

    def xfail_reason(self, target: str) -> str | None:
        """The xfail reason that applies on ``target``, if any."""
        if isinstance(self.xfail, dict):
            return self.xfail.get(target)
        return self.xfail


@dataclass(slots=True)
class Result:
    """The outcome of running one case."""

    id: str
    outcome: str
    duration: float = 0.0
    message: str = ""
    values: list[dict[str, Any]] | None = None  # normalised `value` results (for --record)
