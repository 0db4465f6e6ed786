"""dealtrail stream processing: the pure engine (``streams.engine``) and its Kafka/Faust adapters."""
