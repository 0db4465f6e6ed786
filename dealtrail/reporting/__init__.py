"""Reports on a schedule, their PDF, notifications of findings; imports projections, streams, settings."""
