"""Our SWE tasks as an OpenEnv environment (openenv-core, the `openenv` extra of deepswe-eval).

One server (`server.create_swe_app`, openenv's own app factory) serves many sessions, each a
`SWEEnvironment` with its own sandbox: `reset` picks a task at the door (`door.TaskDoor`: the
task set less what its health manifest calls unhealthy), `step` takes one tool call and returns
what our agent loop would show (`deepswe.env.agent.loop.ToolEnv`, the same code), and the
episode's end runs our reward run (`deepswe.env.episode.grade_trajectory`). Clients speak
openenv's own protocol (`client.SWEEnvClient`, or openenv's GenericEnvClient). The README
section "An OpenEnv environment" says how to start and drive it.
"""
