"""Registry-free base images (Debian via debootstrap, imported into Docker) and offline wheels.

`ensure_base_image("bookworm")` returns a tag such as deepswe/base:bookworm-0123456789ab,
building it first when missing; `download_wheels` fetches wheels for the image's Python so a
sandbox without network can `python -m pip install --no-index --find-links /wheels ...`.
"""

from deepswe.env.images.base import ImageBuildError, build_base_image, ensure_base_image
from deepswe.env.images.recipe import SUITES, base_image_tag, python_version
from deepswe.env.images.wheels import (
    WheelDownloadError,
    download_wheels,
    manylinux_platforms,
    pip_install_command,
)

__all__ = [
    "SUITES",
    "ImageBuildError",
    "WheelDownloadError",
    "base_image_tag",
    "build_base_image",
    "download_wheels",
    "ensure_base_image",
    "manylinux_platforms",
    "pip_install_command",
    "python_version",
]
