"""dealtrail projections: the DuckDB store (single writer), report queries and the compliance report."""
