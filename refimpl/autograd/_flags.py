"""Process-wide autograd switches (torch keeps these global, not per thread)."""

from __future__ import annotations

# detect_anomaly / set_detect_anomaly
anomaly_enabled = False
anomaly_check_nan = True
# set_multithreading_enabled (off: nodes of CUDA devices run on the calling thread too,
# not on the engine's device threads)
multithreading_enabled = True
# torch.autograd._force_original_view_tracking
view_replay_enabled = False
