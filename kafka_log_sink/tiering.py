"""Tiering after a commit (option ``remotePath``): the driver plays the broker's
``RemoteLogManager`` for the partitions a commit wrote.

The topic's local tier is the sink's ``path``; its topic config (``remote.storage.enable``,
``local.retention.ms`` / ``local.retention.bytes``, from the sink's options as every topic config)
says what is tiered and what stays local. After each commit the driver runs one ``RLMCopyTask``
pass (``RemoteLogManager.run_once``: the rolled segments below the last stable offset copied,
then remote expiry) over every partition the commit wrote, then local retention
(``Log.delete_old_segments``: only segments already in the store leave the local disk), as
``kafkalog tier`` does. The metadata topic ``__remote_log_metadata`` lives in ``path``, as a
broker keeps it in its first log directory.

The data is committed before tiering starts, and tiering never undoes it: a store that is down
or slow fails the pass, which is logged (the store, the partition and the segment) and retried at
the next commit for the same partitions, as Kafka's ``RLMCopyTask`` retries on its next run. A
partition whose copy failed keeps its segments locally: local retention waits for the copy.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

from storage_core.errors import KafkaLogError
from storage_core.log import Log
from storage_core.remote import (PyArrowRemoteStorageManager, RemoteLogManager,
                                 TopicBasedRemoteLogMetadataManager, open_store)

from .options import SinkOptions

logger = logging.getLogger(__name__)


class SinkTiering:
    """One query's tiering: the partitions still to tier (failed passes) carried from commit to
    commit in this driver process."""

    def __init__(self, opts: SinkOptions) -> None:
        assert opts.remote_path is not None
        self.opts = opts
        self.configs = dict(opts.store, **{"storage.uri": opts.remote_path})
        self.store_name = open_store(self.configs)[2]
        self.pending: set[tuple[str, int]] = set()

    def after_commit(self, partitions: Iterable[tuple[str, int]], open_log: Callable[[tuple[str, int]], Log]) -> int:
        """Tier ``partitions`` (and those a failed earlier pass left); returns how many failed.
        Never raises for a store's or a log's failure: the commit is done."""
        todo = sorted(self.pending | set(partitions))
        self.pending = set(todo)
        if not todo:
            return 0
        try:
            rlm = RemoteLogManager(PyArrowRemoteStorageManager(self.configs),
                                   TopicBasedRemoteLogMetadataManager({"log.dir": str(self.opts.path)}))
        except (OSError, KafkaLogError) as e:
            logger.error("Tiering to %s after the commit could not start (retried at the next commit): %s",
                         self.store_name, e)
            return len(todo)
        with rlm:
            for tp in todo:
                try:
                    with open_log(tp) as log:
                        results = rlm.run_once([log])
                        errors = [r.error for r in results if r.error]
                        if errors:
                            # run_once logged the failing segment; the store is named here
                            logger.error("Tiering %s-%d to %s failed (the commit stands; retried at the next "
                                         "commit): %s", tp[0], tp[1], self.store_name, "; ".join(errors))
                            continue
                        gone = log.delete_old_segments()
                        if results:
                            r = results[0]
                            logger.info("Tiered %s-%d to %s: %d segments copied (%d bytes), %d local segments "
                                        "deleted, highest offset in remote storage %d", tp[0], tp[1], self.store_name,
                                        r.segments_copied, r.bytes_copied, gone, r.highest_offset_in_remote_storage)
                    self.pending.discard(tp)
                except (OSError, KafkaLogError) as e:
                    logger.error("Tiering %s-%d to %s failed (the commit stands; retried at the next commit): %s",
                                 tp[0], tp[1], self.store_name, e)
        return len(self.pending)
