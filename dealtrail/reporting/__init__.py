"""Reports on a schedule, their PDF, notifications, the access log to a SIEM; imports projections, streams, settings."""
