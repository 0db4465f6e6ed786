"""Reports on a schedule, their PDF, notifications, the access log to a SIEM, daily exports and the group view; imports projections, streams, settings."""
