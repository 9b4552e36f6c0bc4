"""The venv `bash run.sh` sets up is a normal dbt environment: dbt finds the paimon plugin where it looks
for plugins (`dbt --version` lists it, `dbt init` offers it), although the checkout is installed editable."""

import os
import subprocess
import sys


def test_dbt_version_lists_paimon():
    dbt = os.path.join(os.path.dirname(sys.executable), "dbt")
    out = subprocess.run([dbt, "--version"], capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr
    plugins = out.stdout.split("Plugins:", 1)[-1]
    assert "paimon:" in plugins and "spark:" in plugins, out.stdout
