"""deepswe.eval: batch evaluation, SWE-bench-compatible grading, metrics and reports."""
