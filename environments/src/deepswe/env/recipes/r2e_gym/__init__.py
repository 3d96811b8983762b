"""R2E-Gym rows as EnvironmentSpecs: `environment.prepare` / `build_from_source` on
`recipes` (R2E-Gym's install scripts restated; their types in `recipe_types`), the requirement
files of `requirements`, `plan` (which rows have an image or a mirror) and `coverage`."""
