"""Getting events in and judged: the file audit, the projector (Kafka to the store), re-audit, verify, roster import."""
