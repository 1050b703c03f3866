"""Child process of the index cache's crash test: fetches the indexes of the given remote
segments into a RemoteIndexCache again and again (each time removing them first), until killed.

    python index_cache_runner.py <json: {"configs": {...}, "log_dir": "...", "segments": [hex, ...]}>

Prints ``cached <n>`` after each entry was complete."""

from __future__ import annotations

import json
import sys

from storage_core.remote import PyArrowRemoteStorageManager, RemoteIndexCache, deserialize


def main() -> None:
    spec = json.loads(sys.argv[1])
    segments = [deserialize(bytes.fromhex(h)) for h in spec["segments"]]
    cache = RemoteIndexCache(PyArrowRemoteStorageManager(spec["configs"]), spec["log_dir"])
    n = 0
    while True:
        for md in segments:
            cache.remove(md.remote_log_segment_id.id)
            cache.get_index_entry(md)
            n += 1
            print("cached", n, flush=True)


if __name__ == "__main__":
    main()
