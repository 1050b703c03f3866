"""The Spark sink of ``kafkalog`` (writes). Not built yet: see the issue tracker."""
