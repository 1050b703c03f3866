"""Tiered storage (KIP-405): Kafka's remote log metadata, its ``__remote_log_metadata`` record
format (``RemoteLogMetadataSerde``), the metadata topic's partitioner, and the
``RemoteStorageManager`` with a ``pyarrow.fs`` implementation in ``LocalTieredStorage``'s layout,
the ``RemoteLogMetadataManager`` with Kafka's topic-based implementation over a kafkalog
``__remote_log_metadata`` topic, its copy in the store beside the segments
(``RemoteLogMetadataStore``, read by ``RemoteLogMetadataStoreReader``), the ``RemoteIndexCache``,
the ``RemoteLogManager`` (copy, remote expiry) with its broker settings
``RemoteLogManagerConfig``, and ``UnifiedLog``: reads and ListOffsets across both tiers."""

from .metadata import (RemoteLogMetadata, RemoteLogSegmentId, RemoteLogSegmentMetadata,
                       RemoteLogSegmentMetadataSnapshot, RemoteLogSegmentMetadataUpdate,
                       RemoteLogSegmentState, RemotePartitionDeleteMetadata,
                       RemotePartitionDeleteState, TopicIdPartition)
from .metadata_serde import API_KEY_NAMES, RemoteLogMetadataSerde, deserialize, serialize
from ..errors import (CorruptRemoteLogMetadataError, InvalidRemoteLogMetadataError,
                            RemotePositionError, RemoteResourceNotFoundError, RemoteStorageError,
                            RetriableRemoteStorageError)
from .storage_manager import (DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX, IndexType,
                              LogSegmentData, PyArrowRemoteStorageManager, RemoteInputStream,
                              RemoteLogSegmentFileType, RemoteStorageManager,
                              REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX_PROP, ROOT_STORAGE_DIR_NAME,
                              open_store, partition_dir_name, segment_file_name, store_configs)
from .remote_index_cache import DIR_NAME as REMOTE_INDEX_CACHE_DIR_NAME
from .remote_index_cache import (DEFAULT_REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES, RemoteIndexCache,
                                 remote_index_file_prefix)
from .remote_log_metadata_cache import (RemoteLogLeaderEpochState, RemoteLogMetadataCache,
                                        RemotePartitionMetadataStore)
from .remote_log_metadata_store import (METADATA_DIR_NAME, RemoteLogMetadataStore, RemoteLogMetadataStoreReader,
                                        RemotePartitionState)
from .remote_log_metadata_manager import (RemoteLogMetadataManager, TopicBasedRemoteLogMetadataManager,
                                          TopicBasedRemoteLogMetadataManagerConfig)
from .remote_log_manager import (RLM_COPY_TASK, RLM_EXPIRATION_TASK, RemoteLogManager, TierResult,
                                 is_remote_log_enabled)
from .remote_log_manager_config import RemoteLogManagerConfig
from .unified_log import UnifiedLog
from .topic_partitioner import (DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS,
                                REMOTE_LOG_METADATA_TOPIC_NAME, RemoteLogMetadataTopicPartitioner)

__all__ = [
    "API_KEY_NAMES", "CorruptRemoteLogMetadataError", "DEFAULT_REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES",
    "DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS",
    "DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX", "IndexType", "InvalidRemoteLogMetadataError",
    "LogSegmentData", "PyArrowRemoteStorageManager", "REMOTE_LOG_METADATA_TOPIC_NAME",
    "REMOTE_INDEX_CACHE_DIR_NAME", "REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX_PROP", "ROOT_STORAGE_DIR_NAME",
    "RemoteInputStream",
    "RemoteIndexCache", "RemoteLogLeaderEpochState", "RemoteLogMetadata", "RemoteLogMetadataCache",
    "RLM_COPY_TASK", "RLM_EXPIRATION_TASK", "RemoteLogManager", "RemoteLogManagerConfig", "TierResult",
    "is_remote_log_enabled",
    "METADATA_DIR_NAME", "RemoteLogMetadataStore", "RemoteLogMetadataStoreReader", "RemotePartitionState",
    "RemoteLogMetadataManager", "RemoteLogMetadataSerde", "RemoteLogMetadataTopicPartitioner",
    "RemotePartitionMetadataStore",
    "RemoteLogSegmentFileType", "RemoteLogSegmentId", "RemoteLogSegmentMetadata",
    "RemoteLogSegmentMetadataSnapshot", "RemoteLogSegmentMetadataUpdate", "RemoteLogSegmentState",
    "RemotePartitionDeleteMetadata", "RemotePartitionDeleteState", "RemotePositionError",
    "RemoteResourceNotFoundError",
    "RemoteStorageError", "RemoteStorageManager", "RetriableRemoteStorageError", "TopicBasedRemoteLogMetadataManager",
    "TopicBasedRemoteLogMetadataManagerConfig", "TopicIdPartition", "UnifiedLog",
    "deserialize", "open_store", "partition_dir_name", "remote_index_file_prefix", "segment_file_name", "serialize",
    "store_configs",
]
