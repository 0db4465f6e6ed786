"""Events in: file audit, projector (Kafka to store), re-audit, verify, roster CSV; imports projections, streams."""
