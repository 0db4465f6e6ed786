"""Reports: the compliance report, its executive summary, period revisions, the incident page and their templates."""
