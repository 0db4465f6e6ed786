"""The compliance console (``dealtrail serve``): FastAPI pages and JSON API over one store."""
