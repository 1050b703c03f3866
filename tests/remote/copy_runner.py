"""Child process of the crash tests of tests/remote: copies one segment again and again with
PyArrowRemoteStorageManager, each time under a new segment id, until it is killed.

    python copy_runner.py <json: {"configs": {...}, "data": {...}, "start": n, "end": n, "size": n}>

Prints ``copying <id>`` before and ``copied <id>`` after each copy."""

from __future__ import annotations

import json
import sys
import uuid

from storage_core.remote import (LogSegmentData, PyArrowRemoteStorageManager, RemoteLogSegmentId,
                                 RemoteLogSegmentMetadata, TopicIdPartition)


def main() -> None:
    spec = json.loads(sys.argv[1])
    d = spec["data"]
    data = LogSegmentData(d["log"], d["index"], d["timeindex"], d.get("txnindex"), d["snapshot"],
                          d["epochs"].encode())
    tip = TopicIdPartition(uuid.UUID(spec["topic_id"]), (spec["topic"], 0))
    rsm = PyArrowRemoteStorageManager(spec["configs"])
    while True:
        md = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), spec["start"], spec["end"], 0, 1, 0,
                                      spec["size"], {0: spec["start"]})
        print("copying", md.remote_log_segment_id.id, flush=True)
        rsm.copy_log_segment_data(md, data)
        print("copied", md.remote_log_segment_id.id, flush=True)


if __name__ == "__main__":
    main()
