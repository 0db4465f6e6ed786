"""The read side over DuckDB: store, models, records, reports, display; imports schemas, streams.engine only."""
