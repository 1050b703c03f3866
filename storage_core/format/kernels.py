"""The compiled kernels other layers call, by their public names. ``_kernels`` holds the numba
code (a kernel per walk that is sequential by nature) and ``_md5`` the key hashes of the cleaner's
offset map; only ``storage_core.format`` imports them directly, so their signatures can change
behind this facade."""

from __future__ import annotations

from ._kernels import (group_rows, index_entries, parse_headers, put_record_prefix,  # noqa: F401  (re-exported)
                       write_rebuilt_records)
from ._md5 import md5_spans  # noqa: F401  (re-exported)

__all__ = ["group_rows", "index_entries", "md5_spans", "parse_headers", "put_record_prefix", "write_rebuilt_records"]
