"""The compliance report, executive summary, template; imports records, models, store, display, schemas, engine."""
