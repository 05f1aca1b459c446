"""Neural-network building blocks (``tg.nn``): Parameter, Module, layers and losses."""
from . import functional  # noqa: F401
from .modules import (BCELoss, BCEWithLogitsLoss, Conv1d, Conv2d, CrossEntropyLoss, Flatten, Identity, L1Loss, Linear,  # noqa: F401
                      LogSoftmax, Module, MSELoss, NLLLoss, Parameter, ReLU, Sequential, Sigmoid, Softmax, Softplus,
                      Tanh, Unflatten)
from . import utils  # noqa: F401,E402  (tg.nn.utils: clip_grad_norm_, parameters_to_vector, rnn.pad_sequence)
from . import parallel  # noqa: F401,E402  (tg.nn.parallel)
from .parallel import DataParallel  # noqa: F401,E402
