"""Kafka's ``CleanerStats``: what one clean read, kept and wrote, and when (``LogCleaner``
reports them per clean and keeps the last ones for its gauges)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..common import wall_ms


@dataclass
class CleanerStats:
    """Kafka's ``CleanerStats``: what one clean read, kept and wrote, and when."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    invalid_messages_read: int = 0
    messages_written: int = 0
    buffer_utilization: float = 0.0
    start_ms: int = 0
    map_complete_ms: int = 0
    end_ms: int = 0
    clock: Callable[[], int] = field(default=wall_ms, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.start_ms:
            self.start_ms = self.clock()

    def read_messages(self, messages: int, size: int) -> None:
        self.messages_read += messages
        self.bytes_read += size

    def invalid_message(self, n: int = 1) -> None:
        self.invalid_messages_read += n

    def recopy_messages(self, messages: int, size: int) -> None:
        self.messages_written += messages
        self.bytes_written += size

    def index_messages_read(self, n: int) -> None:
        self.map_messages_read += n

    def index_bytes_read(self, n: int) -> None:
        self.map_bytes_read += n

    def index_done(self) -> None:
        self.map_complete_ms = self.clock()

    def all_done(self) -> None:
        self.end_ms = self.clock()

    @property
    def elapsed_secs(self) -> float:
        return (self.end_ms - self.start_ms) / 1000.0

    @property
    def elapsed_indexing_secs(self) -> float:
        return (self.map_complete_ms - self.start_ms) / 1000.0
