"""SWE-bench rows as EnvironmentSpecs: `environment.prepare` / `build_from_source` (the spec's
translation, `install`'s install sequence, `conda`'s package lists, `downloads`' files fetched by
the host), and `coverage`, what `deepswe-eval envs` reports as eligible."""
