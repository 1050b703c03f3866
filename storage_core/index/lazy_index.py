"""Kafka's ``LazyIndex``: an offset or time index opened (mapped) on first use.

Its own module, above :mod:`.offset_index` and :mod:`.time_index` (it builds either), so the
index base below them imports neither. ``LogSegment`` opens its indexes itself; this wrapper is
kept with the behaviour of Kafka's ``LazyIndexTest`` for a segment list that opens them lazily.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Generic, Self, TypeVar

from .abstract_index import DEFAULT_MAX_INDEX_SIZE, AbstractIndex
from .offset_index import OffsetIndex
from .time_index import TimeIndex

__all__ = ["LazyIndex"]

IndexT = TypeVar("IndexT", bound=AbstractIndex)


class LazyIndex(Generic[IndexT]):
    """Defers opening (mapping) an index until ``get()`` (Kafka's ``LazyIndex``): a broker with
    thousands of segments opens only the indexes it reads. Before loading, ``rename_to``,
    ``update_parent_dir``, ``delete_if_exists`` and ``close`` act on the path alone; after, they
    delegate to the index. Thread safe."""

    def __init__(self, path: str | os.PathLike[str], loader: Callable[[Path], IndexT]) -> None:
        self._path = Path(path)
        self._loader = loader
        self._index: IndexT | None = None
        self._lock = threading.Lock()

    @staticmethod
    def for_offset(path: str | os.PathLike[str], base_offset: int,
                   max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
                   writable: bool = True) -> LazyIndex[OffsetIndex]:
        return LazyIndex(path, lambda p: OffsetIndex(p, base_offset, max_index_size, writable))

    @staticmethod
    def for_time(path: str | os.PathLike[str], base_offset: int,
                 max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
                 writable: bool = True) -> LazyIndex[TimeIndex]:
        return LazyIndex(path, lambda p: TimeIndex(p, base_offset, max_index_size, writable))

    @property
    def path(self) -> Path:
        index = self._index
        return index.path if index is not None else self._path

    @property
    def is_loaded(self) -> bool:
        return self._index is not None

    def get(self) -> IndexT:
        """The index, opened on the first call (OSError, e.g. a missing directory, surfaces here)."""
        index = self._index
        if index is not None:
            return index
        with self._lock:
            if self._index is None:
                self._index = self._loader(self._path)
            return self._index

    def update_parent_dir(self, parent_dir: str | os.PathLike[str]) -> None:
        with self._lock:
            if self._index is not None:
                self._index.update_parent_dir(parent_dir)
            else:
                self._path = Path(parent_dir) / self._path.name

    def rename_to(self, new_path: str | os.PathLike[str]) -> None:
        new_path = Path(new_path)
        with self._lock:
            if self._index is not None:
                self._index.rename_to(new_path)
                return
            try:
                os.replace(self._path, new_path)
            except FileNotFoundError:
                # never created (or already deleted): nothing to move, as Kafka's IndexFile
                if self._path.exists():
                    raise
            finally:
                self._path = new_path

    def delete_if_exists(self) -> bool:
        with self._lock:
            if self._index is not None:
                return self._index.delete_if_exists()
            try:
                self._path.unlink()
            except FileNotFoundError:
                return False
            return True

    def close(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.close()

    def close_handler(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.close_handler()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
