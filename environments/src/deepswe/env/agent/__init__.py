"""The DeepSWE agent's text interface: prompts (`prompts`) and reply parsing (`parser`)."""
