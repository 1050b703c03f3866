"""The Spark data source ``kafkalog`` (reads). Not built yet: see the issue tracker."""
