"""The client: openenv's `EnvClient` typed with our action, observation and state.

    from deepswe.eval.openenv.client import SWEEnvClient
    from deepswe.eval.openenv.models import SWEAction

    with SWEEnvClient(base_url="http://localhost:8000").sync() as env:
        first = env.reset(task_id="toycalc__toycalc-add").observation   # .messages: the prompt
        result = env.step(SWEAction(message=model_reply))                # .observation.text
        ...                                                              # until result.done
        result.observation.outcome, result.reward                        # reward None: infra_error

A session is one WebSocket connection; closing the client closes its sandbox on the server.
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from deepswe.eval.openenv.models import SWEAction, SWEObservation, SWEState


class SWEEnvClient(EnvClient[SWEAction, SWEObservation, SWEState]):
    """A session of the SWE environment over openenv's WebSocket protocol."""

    def _step_payload(self, action: SWEAction) -> dict[str, Any]:
        return action.model_dump(exclude_defaults=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SWEObservation]:
        fields = dict(payload.get("observation", {}))
        fields.update(reward=payload.get("reward"), done=payload.get("done", False))
        return StepResult(
            observation=SWEObservation.model_validate(fields),
            reward=payload.get("reward"),
            done=payload.get("done", False),
        )

    def _parse_state(self, payload: dict[str, Any]) -> SWEState:
        return SWEState.model_validate(payload)


__all__ = ["SWEEnvClient"]
