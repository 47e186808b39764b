"""Settings torch keeps under ``torch._functorch`` (``config``: fake-tensor switches)."""
