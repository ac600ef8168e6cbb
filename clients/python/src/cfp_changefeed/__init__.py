"""A Cosmos DB change feed processor for Python applications, on cfp's engine.

See :class:`Processor` and :func:`estimate`.
"""

from ._binary import bundled_cfp, find_cfp
from .errors import (
    CfpNotFoundError,
    ChangeFeedError,
    ChildExitedError,
    EngineError,
    EstimateError,
    OptionsError,
    ProtocolError,
)
from .estimate import Estimate, LeaseLag, estimate
from .processor import (
    PROTOCOL_VERSION,
    ChangeContext,
    HandlerError,
    LeaseContext,
    Processor,
    Range,
)

__all__ = [
    "PROTOCOL_VERSION",
    "CfpNotFoundError",
    "ChangeContext",
    "ChangeFeedError",
    "ChildExitedError",
    "EngineError",
    "Estimate",
    "EstimateError",
    "HandlerError",
    "LeaseContext",
    "LeaseLag",
    "OptionsError",
    "Processor",
    "Range",
    "bundled_cfp",
    "estimate",
    "find_cfp",
]
__version__ = "0.1.0"
