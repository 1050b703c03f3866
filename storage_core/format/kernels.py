"""The compiled kernels other layers call, by their public names. ``_kernels`` holds the numba
code (a kernel per walk that is sequential by nature); only ``storage_core.format`` imports it
directly, so its signatures can change behind this facade."""

from __future__ import annotations

from ._kernels import (index_entries, parse_headers, put_record_prefix,  # noqa: F401  (re-exported)
                       write_rebuilt_records)

__all__ = ["index_entries", "parse_headers", "put_record_prefix", "write_rebuilt_records"]
