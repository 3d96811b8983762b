"""R2E-Gym's environment recipes, one per repository, restated as data for our image stack.

R2E-Gym (agentica-project/R2E-Gym, commit 353348a) builds each row's image
`namanjain12/<repo>_final:<commit>` from three files per repository; every recipe below names
the ones it restates:

- `src/r2egym/repo_analysis/base_dockerfiles/Dockerfile.<repo>`: Ubuntu 22.04, the apt packages,
  the clone at the old commit, `bash install.sh`, `uv pip install tree_sitter_languages`;
- `src/r2egym/install_utils/<repo>_install.sh`: `uv venv --python X.Y` in /testbed/.venv, then
  `uv pip install` lines and the repository's own build. Several scripts try Pythons in turn
  (orange3: 3.7, 3.8, 3.10) and keep the first that installs: our `attempts`, in that order;
- `src/r2egym/agenthub/runtime/docker.py` `setup_env`: at episode start `uv pip install chardet`
  (no network in our sandboxes: it goes into the image) and the hidden tests linked in (the
  grader's part, deepswe.env.r2e_layout);
- the test command, `RepoAnalysisArgs.tests_cmd` (repo_analysis/repo_analysis_args.py), is the
  task's own (data/loaders/r2e_gym.py) and is not restated here.

Pure data (its types in r2e_recipe_types.py): nothing here reads a repository or builds
anything (deepswe.env.recipes.r2e_gym.environment does).
"""

from __future__ import annotations

from deepswe.env.recipes.r2e_gym.recipe_types import (
    INDEX_DATE,
    Attempt,
    MakefileRequirements,
    Packages,
    PipStep,
    Recipe,
    RequirementsFile,
)

R2E_GYM = "agentica-project/R2E-Gym@353348a"
# tornado's logs show setuptools 75.6.0 (before 75.8.0, 2025-01-12) with attrs 24.3.0
# (2024-12-16): those images were built earlier.
TORNADO_INDEX_DATE = "2025-01-01T00:00:00Z"

# Ubuntu 22.04 -> Debian: the compiler and the libraries each Dockerfile installs. python3-dev
# is added by r2e_env only where the image runs Debian's own Python (a host CPython brings its
# headers). Dockerfile lines that only fetch tools (curl, wget, uv, nvm/node) have no
# counterpart: nothing downloads at build time here.
BUILD = ("build-essential", "pkg-config")
SCIENTIFIC = ("gfortran", "libopenblas-dev", "liblapack-dev")
IMAGING = ("libjpeg-dev", "libwebp-dev")
# orange3's Qt: the runtime libraries of its Dockerfile's X/xcb list (-dev headers dropped:
# nothing is compiled against them), GL, and xvfb + xauth for tests_cmd's `xvfb-run`; plus what
# PyQt5's Qt libraries and its `minimal` platform plugin (tests_cmd's QT_QPA_PLATFORM) load (ldd
# in the image: glib, fontconfig, D-Bus, xkbcommon), which R2E-Gym's image evidently has: its
# Qt tests pass there. Not what only the xcb plugin loads (libxcb-xinerama0, libxkbcommon-x11-0,
# libxcb-xkb1): that list lacks them, and R2E-Gym's recorded runs show the plugin failing to
# load ("Could not load the Qt platform plugin "xcb" ... even though it was found", with no
# "could not connect to display" before it, which a loaded plugin prints without a display).
# QtWebEngine's own (NSS, ALSA) are not added: nothing in that list brings them.
QT_RUNTIME = (
    "libglib2.0-0",
    "libfontconfig1",
    "libdbus-1-3",
    "libxkbcommon0",
    "libgl1",
    "libxcb1",
    "libx11-xcb1",
    "libxcb-keysyms1",
    "libxcb-image0",
    "libxcb-shm0",
    "libxcb-icccm4",
    "libxcb-sync1",
    "libxcb-xfixes0",
    "libxcb-shape0",
    "libxcb-randr0",
    "libxcb-render-util0",
    "libxcb-glx0",
    "xvfb",
    "xauth",
)


def _src(repo: str, *extra: str) -> tuple[str, ...]:
    return (
        f"repo_analysis/base_dockerfiles/Dockerfile.{repo}",
        f"install_utils/{repo}_install.sh",
        *extra,
    )


# aiohttp_install.sh: `make .develop` with R2E-Gym's Makefile (repo_testheuristics.py
# handle_aiohttp_makefile: its pip calls made `uv pip`), no `set -e`: a failing make does not
# stop the script. Its pip failures must still stop ours: the offline build learns from them.
MAKE_DEVELOP = (
    'make .develop > /tmp/r2e-make.log 2>&1; echo "make .develop: exit $?"; '
    "cat /tmp/r2e-make.log; "
    "if grep -qE 'No matching distribution found|Could not find a version that satisfies' "
    "/tmp/r2e-make.log; then exit 1; fi; rm -f /tmp/r2e-make.log"
)
# process_aiohttp_updateasyncio.py: `asyncio.async(` (a syntax error since Python 3.7) becomes
# `asyncio.create_task(` in every .py file under aiohttp/, left uncommitted as R2E-Gym leaves it.
ASYNCIO_REWRITE = (
    "grep -rlF --include='*.py' 'asyncio.async(' aiohttp "
    "| xargs -r sed -i 's/asyncio\\.async(/asyncio.create_task(/g'"
)
AIOHTTP_TEST_PACKAGES = (
    "pytest",
    "pytest-asyncio",
    "pytest-cov",
    "pytest-mock",
    "coverage",
    "gunicorn",
    "async-generator",
    "brotlipy",
    "cython",
    "multdict",  # sic: the script's misspelling installs PyPI's `multdict` too
    "yarl",
    "async-timeout",
    "trustme",
    "chardet",
)


def _orange(
    python: str, first: tuple[str, ...], *, dev: bool, opt: bool, sklearn: bool, binary: bool
) -> Attempt:
    steps: list[PipStep] = [Packages(first, upgrade=True)]
    steps += [RequirementsFile("requirements-core.txt"), RequirementsFile("requirements-gui.txt")]
    if dev:
        steps.append(RequirementsFile("requirements-dev.txt", optional=True))
    steps.append(RequirementsFile("requirements-sql.txt"))
    if opt:
        steps.append(RequirementsFile("requirements-opt.txt", optional=True))
    if sklearn:
        steps.append(Packages(("scipy", "scikit-learn")))
    install = [
        "python setup.py build_ext --inplace",
        "python setup.py develop",
        *(["pip install -e . --no-binary=orange3"] if binary else []),
        # check_orange: the import, then the `datasets` link its tests read
        ".venv/bin/python -c 'import Orange; print(Orange.__file__)'",
        "ln -s Orange/tests/datasets/ datasets",
    ]
    return Attempt(python, tuple(steps), tuple(install))


_QT = ("PyQt5>=5.12,!=5.15.1", "PyQtWebEngine>=5.12")


def _numpy(python: str) -> Attempt:
    return Attempt(
        python,
        (
            Packages(
                ("setuptools<=59.8.0", "cython<0.30", "pytest", "pytest-env", "hypothesis", "nose")
            ),
        ),
        (
            "ln -sf /usr/include/locale.h /usr/include/xlocale.h",  # the Dockerfile's, for old numpy
            "python setup.py build_ext --inplace",
            ".venv/bin/python -c 'import numpy; numpy.array([1,2])'",  # check_numpy
        ),
    )


# pandas_install.sh's `VERSIONEER_COMMAND`, run by bash (its `echo -e`).
_VERSIONEER = (
    "bash -c 'echo -e \"[versioneer]\\nVCS = git\\nstyle = pep440\\n"
    "versionfile_source = pandas/_version.py\\nversionfile_build = pandas/_version.py\\n"
    "tag_prefix =\\nparentdir_prefix = pandas-\" > setup.cfg && versioneer install'"
)


def _pandas(python: str, numpy: str, cython: str) -> Attempt:
    pins = ("setuptools==62.*", f"numpy=={numpy}", f"cython{cython}", "versioneer==0.23")
    return Attempt(
        python,
        (
            Packages(("pip", "wheel"), upgrade=True),
            Packages(
                (*pins, "python-dateutil", "pytz", "pytest", "hypothesis", "jinja2"), upgrade=True
            ),
            RequirementsFile("requirements-dev.txt"),
        ),
        (
            _VERSIONEER,
            "rm -f pyproject.toml",
            "python setup.py clean --all",
            "CFLAGS='-O0 -Wno-error=array-bounds' python setup.py build_ext --inplace -j 4",
            "pip install -e .",
            ".venv/bin/python -c 'import pandas; print(pandas.DataFrame([[1,2,3]]))'",
        ),
    )


def _editable(python: str, before: tuple[PipStep, ...], extras: str = "") -> Attempt:
    # Unquoted: the task layer reads `pip install -e .[extras]` to fetch the project's
    # requirements up front (deepswe.env.images.offline.self_install_extras).
    return Attempt(python, before, (f"pip install -e .{extras}",))


RECIPES: dict[str, Recipe] = {
    "aiohttp": Recipe(
        "aiohttp",
        _src(
            "aiohttp",
            "install_utils/process_aiohttp_updateasyncio.py",
            "repo_analysis/repo_testheuristics.py",
        ),
        BUILD + IMAGING + SCIENTIFIC,
        (
            Attempt(
                "3.9",
                (
                    MakefileRequirements((".install-cython", ".install-deps", ".develop")),
                    Packages(AIOHTTP_TEST_PACKAGES),
                ),
                (MAKE_DEVELOP, ASYNCIO_REWRITE),
            ),
        ),
        differences=(
            "make runs the base commit's Makefile with pip, not the fix commit's with `uv pip`",
            "no node: `generate-llhttp` fails as in R2E-Gym's images, which lack the llhttp "
            "submodule; make stops there and aiohttp runs from /testbed, as there",
            "the requirement files make installs are installed before it runs (offline)",
        ),
    ),
    "coveragepy": Recipe(
        "coveragepy",
        _src("coveragepy"),
        BUILD,
        tuple(
            Attempt(
                python,
                (RequirementsFile("requirements/dev.pip"), Packages(("setuptools", "pytest"))),
                (
                    "pip install -e .",
                    "python igor.py zip_mods",
                    ".venv/bin/python -c 'import coverage; print(coverage.__version__)'",
                ),
            )
            for python in ("3.7", "3.10")  # sic: its test_39_install makes a 3.7 venv
        ),
    ),
    "datalad": Recipe(
        "datalad",
        _src("datalad"),
        BUILD + IMAGING + SCIENTIFIC + ("git-annex", "libexempi-dev"),
        tuple(
            Attempt(
                python,
                (Packages(("setuptools", "pytest", "pytest-cov", "numpy", "pybids<0.7.0", *more)),),
                (
                    'git config --global annex.security.allowed-url-schemes "http https file"',
                    "pip install -e .[full]",
                    "pip install -e .[devel]",
                    ".venv/bin/python -c 'import datalad; print(datalad.__version__)'",
                ),
            )
            for python, more in (("3.9", ()), ("3.7", ("fasteners", "bids")))
        ),
    ),
    "numpy": Recipe(
        "numpy",
        _src("numpy"),
        BUILD + SCIENTIFIC,
        (_numpy("3.7"), _numpy("3.10")),
        needs_submodules=True,
    ),
    "orange3": Recipe(
        "orange3",
        _src("orange3"),
        # libkrb5-dev: pymssql 2.3.2, the setup logs' pin, built from source as uv built it,
        # links gssapi_krb5 and krb5, whose -dev links R2E-Gym's Ubuntu image evidently has
        BUILD + SCIENTIFIC + ("libpq-dev", "freetds-dev", "libkrb5-dev") + QT_RUNTIME,
        (
            _orange(
                "3.7",
                ("setuptools<60", "numpy<1.18", "wheel", "cython<0.30", "pytest", *_QT),
                dev=False,
                opt=True,
                sklearn=True,
                binary=False,
            ),
            _orange(
                "3.8",
                ("setuptools", "numpy", "wheel", "cython<0.30", "pytest", *_QT),
                dev=False,
                opt=True,
                sklearn=False,
                binary=False,
            ),
            _orange(
                "3.10",
                ("setuptools", "numpy", "wheel", "cython", "pytest", *_QT),
                dev=True,
                opt=False,
                sklearn=False,
                binary=True,
            ),
        ),
        needs_submodules=True,
        differences=(
            "Qt's X libraries without their -dev headers (nothing compiles against them)",
        ),
    ),
    "pandas": Recipe(
        "pandas",
        _src("pandas"),
        BUILD,
        (
            _pandas("3.7", "1.17.*", "<0.30"),
            _pandas("3.8", "1.20.*", "<0.30"),
            _pandas("3.10", "1.26.*", "===3.0.5"),
        ),
    ),
    "pillow": Recipe(
        "pillow",
        _src("pillow"),
        # No Qt runtime on purpose: R2E-Gym's image has none, so PyQt5 does not import there
        # and the ImageQt tests skip; with the libraries they would run.
        BUILD + IMAGING + ("libtiff5-dev",),
        (
            Attempt(
                "3.9",
                (Packages(("setuptools", "pytest", "pytest-cov", "PyQt5")),),
                (
                    "pip install -e . --no-build-isolation",
                    ".venv/bin/python -c 'from PIL import Image; Image.new(\"RGB\", (1, 1))'",
                ),
            ),
        ),
    ),
    "pyramid": Recipe(
        "pyramid",
        _src("pyramid"),
        BUILD + IMAGING + SCIENTIFIC,
        (_editable("3.8", (Packages(("tox", "pytest")),), "[testing]"),),
        differences=(
            '`uv pip install -e .` then `uv pip install "pyramid[testing]"` is one '
            "`pip install -e .[testing]` (the same set: the installed pyramid and its extra)",
            "tox and pytest are installed before pyramid, not after (the project's own pins win)",
        ),
    ),
    "scrapy": Recipe(
        "scrapy",
        _src("scrapy"),
        BUILD + IMAGING + SCIENTIFIC,
        (
            _editable(
                "3.9",
                (
                    RequirementsFile("requirements.txt", optional=True),
                    Packages(("pytest", "testfixtures", "pyftpdlib", "pexpect")),
                ),
            ),
        ),
        differences=("its test packages are installed before scrapy, not after",),
    ),
    "sympy": Recipe(
        "sympy",
        ("repo_analysis/base_dockerfiles/Dockerfile.sympy", "install_utils/sympy_install.sh"),
        ("build-essential",),
        (_editable("3.8", (Packages(("numpy", "mpmath", "pytest", "ipython", "numexpr")),)),),
        differences=(
            "the repository is in /testbed (R2E-Gym's sympy Dockerfile uses /sympy; no sympy "
            "row is in R2E-Gym-Subset)",
        ),
    ),
    "tornado": Recipe(
        "tornado",
        _src("tornado"),
        BUILD + IMAGING + SCIENTIFIC,
        (_editable("3.9", (Packages(("pycares", "pycurl", "twisted", "tox", "pytest")),)),),
        index_date=TORNADO_INDEX_DATE,
        differences=("its test packages are installed before tornado, not after",),
    ),
}

# setup_env's `uv pip install chardet`, made at every episode start by R2E-Gym.
EPISODE_PACKAGES = ("chardet",)


def recipe_for(repo_name: str) -> Recipe | None:
    """The recipe of an R2E-Gym repo_name ("pillow"), or None when R2E-Gym has none."""
    return RECIPES.get(repo_name.lower())


__all__ = [
    "EPISODE_PACKAGES",
    "INDEX_DATE",
    "R2E_GYM",
    "RECIPES",
    "Attempt",
    "MakefileRequirements",
    "Packages",
    "PipStep",
    "Recipe",
    "RequirementsFile",
    "recipe_for",
]
