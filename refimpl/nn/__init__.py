"""``refimpl.nn``: modules, parameters, initialisers and the functional layer (torch.nn).

``refimpl.nn.functional`` holds the ops layers call; ``refimpl.nn.init`` the
initialisers; ``refimpl.nn.utils`` gradient clipping; ``refimpl.nn.modules.module`` the
global module hooks (``register_module_forward_hook`` and friends).
"""

from __future__ import annotations

from refimpl.nn import functional, init, parallel, utils
from refimpl.nn.modules import *
from refimpl.nn.modules import __all__ as _modules_all
from refimpl.nn.parallel import DataParallel
from refimpl.nn.parameter import Buffer, Parameter

__all__ = ["Buffer", "DataParallel", "Parameter", "functional", "init", "parallel", "utils"]
__all__.extend(_modules_all)
