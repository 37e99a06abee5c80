"""Where the package finds libthreelc.so and when it loads it, each in a fresh interpreter:
`import threelc` (and the launcher, threelc.launcher) loads neither the library nor numpy; a
copy of the package with the library inside it (what `pip install` makes) loads that copy, and
outside a checkout nothing but the package's own directory is tried; a checkout's package
falls back to build/lib."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from support.paths import PYTHON_PACKAGE, REPO, library_path


def _python(code: str, pythonpath: Path, **env_overrides):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "THREELC_LIBRARY")}
    env["PYTHONPATH"] = str(pythonpath)
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def _installed_copy(site: Path, with_library: bool) -> Path:
    """The package copied to site/threelc, as pip lays it out (the library inside it)."""
    package = site / "threelc"
    shutil.copytree(PYTHON_PACKAGE / "threelc", package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    if with_library:
        shutil.copy2(library_path(), package / "libthreelc.so")
    return package


def test_import_threelc_and_the_launcher_load_nothing(tmp_path):
    missing = tmp_path / "nowhere" / "libthreelc.so"
    proc = _python("import sys, threelc, threelc.launcher.main\n"
                   "print(sorted(m for m in ('numpy', 'threelc._library', 'threelc.codec', "
                   "'threelc.engine') if m in sys.modules))\n"
                   "threelc.init()", PYTHON_PACKAGE, THREELC_LIBRARY=str(missing))
    # nothing loaded by the imports; the first use of a name loads the library, which fails
    assert proc.stdout.splitlines() == ["[]"], proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and str(missing) in proc.stderr


def test_a_version_probe_without_the_library_does_not_raise_import_error(tmp_path):
    """getattr(threelc, "__version__", None) and hasattr, as tools probe packages: without a
    library (and no installed distribution) they answer None and False."""
    missing = tmp_path / "nowhere" / "libthreelc.so"
    proc = _python("import threelc\n"
                   "print(getattr(threelc, '__version__', None), hasattr(threelc, "
                   "'__version__'))", PYTHON_PACKAGE, THREELC_LIBRARY=str(missing))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None", "False"], proc.stdout


def test_an_installed_copy_loads_its_own_library(tmp_path):
    package = _installed_copy(tmp_path / "site", with_library=True)
    proc = _python("import threelc, threelc._library as l\n"
                   "print(l.path, threelc.__version__)", tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    path, version = proc.stdout.split()
    assert Path(path) == package / "libthreelc.so"
    assert version == _python("import threelc; print(threelc.__version__)", PYTHON_PACKAGE,
                              THREELC_LIBRARY=str(library_path())).stdout.strip()


def test_outside_a_checkout_only_the_package_directory_is_tried(tmp_path):
    package = _installed_copy(tmp_path / "site", with_library=False)
    proc = _python("import threelc.codec", tmp_path / "site")
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr
    assert f"looked in: {package / 'libthreelc.so'});" in proc.stderr, proc.stderr
    assert "pip install ." in proc.stderr


def test_a_checkout_falls_back_to_its_build_tree():
    proc = _python("import threelc._library as l; print(*l.candidates())", PYTHON_PACKAGE,
                   THREELC_LIBRARY=str(library_path()))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(PYTHON_PACKAGE.resolve() / "threelc" / "libthreelc.so"),
                                   str(REPO / "build" / "lib" / "libthreelc.so")]


def test_the_launcher_gives_ranks_the_package_only_from_a_checkout(tmp_path):
    code = ("from threelc.launcher.environment import checkout_python_dir\n"
            "print(checkout_python_dir())")
    assert _python(code, PYTHON_PACKAGE).stdout.strip() == str(PYTHON_PACKAGE.resolve())
    _installed_copy(tmp_path / "site", with_library=False)
    assert _python(code, tmp_path / "site").stdout.strip() == "None"
