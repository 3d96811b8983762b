"""The server: openenv's own app factory (`create_app`) over `SWEEnvironment` sessions.

Endpoints are openenv's: `/ws` holds one session per connection (reset, step, state, close;
what `SWEEnvClient` and openenv's `GenericEnvClient` speak), and the plain HTTP routes `/health`,
`/metadata`, `/schema`, and `/reset`, `/step`, `/state`, which in openenv-core 0.3.0 make a
fresh environment for each request (a session of one call: an episode needs `/ws`).
openenv's session table caps sessions at `max_sessions` and its reaper closes one idle past
`session_ttl_s`; closing a session closes its sandbox.
"""

from __future__ import annotations

import functools

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.types import ConcurrencyConfig

from deepswe.eval.openenv.config import OpenEnvConfig
from deepswe.eval.openenv.door import TaskDoor, TaskRefused
from deepswe.eval.openenv.environment import NoEpisode, SessionClosed, SWEEnvironment
from deepswe.eval.openenv.models import SWEAction, SWEObservation

ENV_NAME = "deepswe-swe"
# Over plain HTTP these reach FastAPI (over /ws openenv answers each with an error message):
# a status that says what went wrong instead of a 500 and a traceback in the server's log.
HTTP_STATUS: dict[type[Exception], int] = {TaskRefused: 404, NoEpisode: 409, SessionClosed: 410}


def create_swe_app(config: OpenEnvConfig, door: TaskDoor) -> FastAPI:
    """The FastAPI app serving `door`'s tasks under `config` (run it with uvicorn)."""
    app = create_app(
        functools.partial(SWEEnvironment, door, config),
        SWEAction,
        SWEObservation,
        env_name=ENV_NAME,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=config.max_sessions, session_timeout=config.session_ttl_s
        ),
    )
    for exc_type, status in HTTP_STATUS.items():
        app.add_exception_handler(exc_type, _answer(status))
    return app


def _answer(status: int):
    async def handler(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=status, content={"detail": str(exc)})

    return handler


def serve(config: OpenEnvConfig, door: TaskDoor) -> None:
    """Serve until interrupted (uvicorn, one process: the sessions share its sandbox fleet)."""
    import uvicorn

    uvicorn.run(create_swe_app(config, door), host=config.host, port=config.port)


__all__ = ["ENV_NAME", "create_swe_app", "serve"]
