"""The execution-free verifier: an LLM judge's P(YES) that a candidate's patch resolves its issue.

render.py      the judge's chat (issue, attempt, patch, question) and condensation to a budget
r2e.py         R2E-Gym recorded trajectories as Trajectory, rendered the same way
tokens.py      the judge's own tokenizer as a chat token counter
answer.py      P(YES) / (P(YES) + P(NO)) from a reply's top log-probs, answer found by content
endpoint.py    the judge behind an OpenAI-compatible endpoint (vLLM)
local.py       the judge in process (transformers), the score from logits
score.py       Judge protocol, EFConfig, make_judge, score_candidates into the VerdictStore
judge_data.py  judge SFT rows from graded train-split episodes
"""
