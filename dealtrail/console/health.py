"""``/healthz`` and ``/readyz``: for orchestrators (compose, Kubernetes), without authentication
and without data.

``/healthz`` answers 200 while the process serves requests (alive). ``/readyz`` answers 200 when
the process is connected to Kafka and has caught up within the lag bound
(``DEALTRAIL_HEALTH__MAX_LAG_SECONDS``), else 503; its JSON body says only whether Kafka is
connected and the lag (messages, seconds), never a finding, a table or a user. A console over a
file (``dealtrail serve``) reads no topic: it is ready while it serves.

The same router serves the console (``create_app``) and the projector's own small server
(:func:`health_app`, ``DEALTRAIL_HEALTH__PORT``) when it runs without the console.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

Readiness = Callable[[], dict[str, Any]]
"""The ``/readyz`` body now; its ``ready`` key (bool) picks 200 or 503."""

router = APIRouter()


@router.get("/healthz", include_in_schema=False)
def healthz() -> JSONResponse:
    """200 while the process serves requests."""
    return JSONResponse({"alive": True}, headers={"Cache-Control": "no-store"})


@router.get("/readyz", include_in_schema=False)
def readyz(request: Request) -> JSONResponse:
    """200 when connected to Kafka and caught up (or when this process reads no topic), else
    503, with the connection and the lag."""
    readiness: Readiness | None = getattr(request.app.state, "readiness", None)
    body = {"ready": True, "kafka": "not used"} if readiness is None else readiness()
    return JSONResponse(body, status_code=200 if body.get("ready") else 503, headers={"Cache-Control": "no-store"})


def health_app(readiness: Readiness) -> FastAPI:
    """A server with only ``/healthz`` and ``/readyz`` (the projector without the console).

    Args:
        readiness: the ``/readyz`` body now (see :data:`Readiness`).
    """
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.state.readiness = readiness
    app.include_router(router)
    return app
