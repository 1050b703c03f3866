"""The `kafkalog` command line: one module per command group, one output layer."""
