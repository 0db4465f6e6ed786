"""Rule modules: one per game plus the dealtrail integrity rules. Each exposes ``check(step)``."""
