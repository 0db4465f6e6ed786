"""Investigating a finding: replay, its step-through views, evidence packages, video clip links."""
