"""swe-mini: real bugs injected into real PyPI projects, the tiny profile's dataset (see data/swe-mini/README.md)."""
