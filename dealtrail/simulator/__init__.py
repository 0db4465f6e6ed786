"""The casino-floor simulator: plays rounds of the three seed games and injects procedural errors."""
