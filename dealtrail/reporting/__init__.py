"""Scheduled reports, PDFs, notifications, SIEM feed, exports, group view; imports projections, streams, settings."""
