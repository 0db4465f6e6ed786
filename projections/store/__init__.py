"""The store: the DuckDB writer, its SQL, summaries, archive, replica, owner-only files; imports schemas, streams."""
