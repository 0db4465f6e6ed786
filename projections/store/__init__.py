"""The store: DuckDB writer, its SQL, summaries, archive, replica; imports schemas, streams.engine, display."""
