#!/bin/sh
# Runs inside a fresh debootstrap rootfs (chroot, as root) before it is imported into Docker.
# Its content is part of the recipe hash: editing it gives the image a new tag.
set -eu

# Tasks run `python -m pytest` in /testbed. A venv at /opt/venv, first on PATH (the image's
# ENV), makes `python` and `pip` resolve to it and sidesteps PEP 668's "externally managed"
# refusal on bookworm. Debian's ensurepip seeds it with pip and setuptools offline.
python3 -m venv /opt/venv
/opt/venv/bin/python -m pip --version

mkdir -p /testbed /wheels

# Repositories are copied in by another uid: without safe.directory git refuses them
# ("dubious ownership"). A fixed identity lets graders commit or stash without prompts.
git config --system safe.directory '*'
git config --system user.name deepswe
git config --system user.email deepswe@localhost
git config --system init.defaultBranch main
git config --system advice.detachedHead false

# Keep later apt installs (derived images) as small as this one.
cat > /etc/dpkg/dpkg.cfg.d/01-deepswe-nodoc <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
CFG

# The tag hashes the recipe, not the Debian point release it met: record what was installed.
dpkg-query -W -f '${Package} ${Version}\n' > /etc/deepswe-base-packages.txt

# Size: apt caches and lists, docs (copyright files stay), man pages, translations, logs.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old \
       /usr/share/man/* /usr/share/info/* /usr/share/locale/* /var/log/*.log \
       /var/log/apt/* /tmp/* /var/tmp/*
find /usr/share/doc -type f ! -name copyright -delete
find /usr/share/doc -type d -empty -delete
