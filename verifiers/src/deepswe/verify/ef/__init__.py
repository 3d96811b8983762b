"""The execution-free verifier: an LLM judge's P(YES) that a candidate's patch resolves its issue.

render.py      our judge's chat (issue, attempt, patch, question) and condensation to a budget
r2e_input.py   R2E-Gym's verifier input (traj2verifier_data): the published verifier's prompt
r2e_patch.py   the patch R2E-Gym's verifier input shows (edited .py files, rebuilt)
render_cli.py  `deepswe-verify render`: a recorded trajectory's prompt in either format
r2e.py         R2E-Gym recorded trajectories as Trajectory, rendered the same way
tokens.py      the judge's own tokenizer as a chat token counter
answer.py      P(YES) / (P(YES) + P(NO)) from a reply's top log-probs, answer found by content
endpoint.py    the judge behind an OpenAI-compatible endpoint (vLLM)
local.py       the judge in process (transformers), the score from logits
score.py       Judge protocol, make_judge (the one factory), the format by name, score_candidates
judge_data.py  judge SFT rows from graded train-split episodes
"""
