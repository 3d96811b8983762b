"""Environment markers decided for the image's Python, not the host's: pip evaluates a
requirement's marker for the interpreter it runs under, so a requirement file or an sdist's build
requirements read on the host's 3.11 for a 3.6 image must be decided here instead."""

from __future__ import annotations

import zipfile
from pathlib import Path


def for_target(requirement: str, python: str) -> str | None:
    """`requirement` without its marker when the marker holds on CPython `python` on Linux;
    None when it does not hold. Lines that are not requirements (URLs, paths) stay as they are."""
    from packaging.markers import default_environment
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return requirement
    if req.marker is not None:
        env = default_environment()
        env.update(
            python_version=python,
            python_full_version=f"{python}.0",
            sys_platform="linux",
            platform_system="Linux",
            os_name="posix",
            platform_python_implementation="CPython",
            implementation_name="cpython",
            extra="",
        )
        if not req.marker.evaluate(env):
            return None
        req.marker = None
    return str(req)


def unmet_for_target(wheel_dir: Path, python: str) -> list[str]:
    """Requirements of the wheels in `wheel_dir` that hold on the target Python and that no
    wheel there provides: pip decided their markers for the host and may have skipped them."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    have, needs = set(), {}
    for wheel in wheel_dir.glob("*.whl"):
        have.add(canonicalize_name(wheel.name.split("-")[0]))
        with zipfile.ZipFile(wheel) as zf:
            meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
            text = zf.read(meta).decode("utf-8", "replace") if meta else ""
        for line in text.splitlines():
            if line.startswith("Requires-Dist:"):
                kept = for_target(line.split(":", 1)[1].strip(), python)
                try:
                    req = Requirement(kept) if kept is not None else None
                except InvalidRequirement:  # not a requirement pip would act on either
                    req = None
                if req is not None:
                    needs[canonicalize_name(req.name)] = f"{req.name}{req.specifier}"
    return [r for name, r in needs.items() if name not in have]


__all__ = ["for_target", "unmet_for_target"]
