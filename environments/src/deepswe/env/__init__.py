"""deepswe.env: sandboxes, images, agent tools, the agent loop and the grader."""
