"""kafkalog's storage engine: Kafka's log format and storage, with no Spark imports.

The engine's public names import from the package itself::

    from storage_core import Log, LogConfig, LogManager

They are resolved on first use (PEP 562 ``__getattr__``), so that ``import storage_core`` (which
every ``kafkalog`` command and ``python -m storage_core.tools`` does) stays cheap: the CLI's
``--help`` needs none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "Log": "storage_core.log",
    "LogConfig": "storage_core.config",
    "LogManager": "storage_core.server",
    "LogManagerConfig": "storage_core.server",
    "KafkaLogError": "storage_core.errors",
}

__all__ = ["KafkaLogError", "Log", "LogConfig", "LogManager", "LogManagerConfig", "__version__"]

if TYPE_CHECKING:                                  # for type checkers and IDEs: the eager form
    from storage_core.config import LogConfig
    from storage_core.errors import KafkaLogError
    from storage_core.log import Log
    from storage_core.server import LogManager, LogManagerConfig


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'storage_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value                        # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
