"""Reports on a schedule, their PDF print and the notifications of findings."""
