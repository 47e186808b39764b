"""``refimpl.optim``: optimizers and learning-rate schedulers (torch.optim).

Each optimizer computes torch's update step for step; ``lr_scheduler`` holds the
schedulers.
"""

from refimpl.optim import lr_scheduler
from refimpl.optim.adagrad import Adagrad
from refimpl.optim.adam import Adam, AdamW
from refimpl.optim.adaptive import Adadelta, Adamax, NAdam, RAdam, Rprop
from refimpl.optim.asgd import ASGD
from refimpl.optim.optimizer import Optimizer
from refimpl.optim.rmsprop import RMSprop
from refimpl.optim.sgd import SGD

__all__ = ["ASGD", "SGD",
           "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "Optimizer", "RAdam",
           "RMSprop", "Rprop", "lr_scheduler"]
