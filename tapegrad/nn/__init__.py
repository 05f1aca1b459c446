"""Neural-network building blocks (``tg.nn``): Parameter, Module, layers and losses."""
from . import functional  # noqa: F401
from .modules import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, Flatten, Identity, L1Loss, Linear, LogSoftmax,  # noqa: F401
                      Module, MSELoss, NLLLoss, Parameter, ReLU, Sequential, Sigmoid, Softmax, Tanh,
                      Unflatten)
