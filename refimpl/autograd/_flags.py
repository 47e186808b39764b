"""Process-wide autograd switches (torch keeps these global, not per thread)."""

from __future__ import annotations

# detect_anomaly / set_detect_anomaly
anomaly_enabled = False
anomaly_check_nan = True
# set_multithreading_enabled (accepted and reported; refimpl's CPU engine runs backward
# on the calling thread either way)
multithreading_enabled = True
# torch.autograd._force_original_view_tracking
view_replay_enabled = False
