"""Run by an image's /opt/venv python at build time (stdlib only, Python 3.5+).

Makes the venv's packages visible to its base interpreter too: a .pth file in the base
interpreter's site-packages adds the venv's site-packages (and its .pth files) whenever that
interpreter runs outside the venv. Needed because tools like tox-current-env (swebench's sphinx
specs) symlink to sys.executable, and a symlink to a venv's python starts the base interpreter
without the venv. swebench's conda environments are real prefixes, where this cannot happen.
"""

import os
import subprocess
import sys
import sysconfig

venv_site = sysconfig.get_paths()["purelib"]
home = None
with open(os.path.join(sys.prefix, "pyvenv.cfg")) as cfg:
    for line in cfg:
        key, _, value = line.partition("=")
        if key.strip() == "home":
            home = value.strip()
base = os.path.join(home, "python3")
code = "import site; print(site.getsitepackages()[0])"
base_site = subprocess.check_output([base, "-c", code], universal_newlines=True).strip()
os.makedirs(base_site, exist_ok=True)
line = "import site, sys; sys.prefix == sys.base_prefix and site.addsitedir(%r)\n" % venv_site
with open(os.path.join(base_site, "deepswe-venv.pth"), "w") as out:
    out.write(line)
print("%s -> %s" % (base_site, venv_site))
