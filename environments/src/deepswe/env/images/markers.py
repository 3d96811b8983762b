"""Environment markers decided for the image's Python, not the host's: pip evaluates a
requirement's marker for the interpreter it runs under, so a requirement file or an sdist's build
requirements read on the host's 3.11 for a 3.6 image must be decided here instead."""

from __future__ import annotations


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


__all__ = ["for_target"]
