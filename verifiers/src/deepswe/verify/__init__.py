"""deepswe.verify: execution-free and execution-based verifiers and hybrid selection."""
