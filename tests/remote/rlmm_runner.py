"""Child process of the metadata manager's crash test, and the operation script both sides share.

    python rlmm_runner.py <data dir> <seed>

Runs ``operations(seed)`` against a ``TopicBasedRemoteLogMetadataManager`` in ``<data dir>``,
printing ``acked <i>`` after operation ``i`` returned (the record is durable), until killed, done,
or stdin ends. Each operation waits for a line on stdin first: the test hands out the operations it
lets the writer start, so the writer is never more than those past the last ``acked`` line read."""

from __future__ import annotations

import random
import sys
import uuid

from storage_core.remote import (RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate,
                                 RemoteLogSegmentState as S, TopicIdPartition)

TIPS = [TopicIdPartition(uuid.UUID(int=0x8C5F2CEFDB7D4AB1BF3CDAA5C2FEDB00), ("tieredTopic", p)) for p in range(3)]


def operations(seed: int, count: int = 400) -> list:
    """A deterministic mix of copies and deletions over three partitions, with ids from the seed:
    each segment goes STARTED -> FINISHED -> DELETE_STARTED -> DELETE_FINISHED, some copies
    stay STARTED (orphans), their steps interleaved across segments and partitions."""
    rnd = random.Random(seed)
    ops: list = []
    active: list[list] = []                 # [metadata, next state index]
    next_start = {tip: 0 for tip in TIPS}
    flow = [S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED]
    while len(ops) < count:
        if not active or rnd.random() < 0.4:
            tip = rnd.choice(TIPS)
            start = next_start[tip]
            end = start + rnd.randint(0, 99)
            next_start[tip] = end + 1
            sid = RemoteLogSegmentId(tip, uuid.UUID(int=rnd.getrandbits(128)))
            md = RemoteLogSegmentMetadata(sid, start, end, 1700000000000 + start, 1, 1700000000000 + len(ops),
                                          1000 + end - start, {rnd.randint(0, 3): start})
            ops.append(md)
            active.append([md, 0])
            continue
        item = rnd.choice(active)
        md, step = item
        if rnd.random() < 0.1 and step == 0:
            active.remove(item)             # an orphan: its copy never finishes
            continue
        ops.append(RemoteLogSegmentMetadataUpdate(md.remote_log_segment_id, 1700000000000 + len(ops), None,
                                                  flow[step], 1))
        item[1] += 1
        if item[1] == len(flow):
            active.remove(item)
    return ops


def apply(manager, op) -> None:
    if isinstance(op, RemoteLogSegmentMetadata):
        manager.add_remote_log_segment_metadata(op)
    else:
        manager.update_remote_log_segment_metadata(op)


def main() -> None:
    from storage_core.remote import TopicBasedRemoteLogMetadataManager

    data_dir, seed = sys.argv[1], int(sys.argv[2])
    with TopicBasedRemoteLogMetadataManager({"log.dir": data_dir, "remote.log.metadata.topic.num.partitions": "5"}) \
            as manager:
        for i, op in enumerate(operations(seed)):
            if not sys.stdin.readline():
                return
            apply(manager, op)
            print("acked", i, flush=True)


if __name__ == "__main__":
    main()
