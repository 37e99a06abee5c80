"""A system library the build needs that is missing (hidden from CMake with
CMAKE_DISABLE_FIND_PACKAGE_<name>) stops `pip install .` with a message naming the Debian
package to install and the CMake variable that points at an installation elsewhere; a missing
optional one (UCX) is named and left out. Configure steps only: nothing is compiled."""

from __future__ import annotations

from install_steps import clean_env, step
from support.paths import REPO


def words(text: str) -> str:
    """The output with every run of white space made one space: CMake wraps its errors."""
    return " ".join(text.split())


def test_pip_install_names_the_missing_package(venv_python, work):
    # -Ccmake.define reaches CMake: the same path as the build's options (THREELC_CUDA, ...).
    proc = step("pip wheel . without OpenSSL",
                [venv_python, "-m", "pip", "wheel", "--no-deps", "--wheel-dir",
                 work / "unused", REPO, f"--config-settings=build-dir={work / 'without-ssl'}",
                 "--config-settings=cmake.define.CMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON",
                 "--config-settings=cmake.define.THREELC_CUDA=OFF"],
                timeout=300, cwd=work, expect_ok=False)
    output = words(proc.stdout + proc.stderr)
    assert "threelc: OpenSSL not found (OpenSSL's libcrypto)" in output, output[-4000:]
    assert "apt-get install libssl-dev" in output, output[-4000:]
    assert "-Ccmake.define.OpenSSL_ROOT=<prefix>" in output, output[-4000:]
    assert "Install with pip" in output, output[-4000:]  # pyproject.toml's after-failure note
    assert not list((work / "unused").glob("*.whl"))


def test_cmake_names_boost(work):
    proc = step("cmake without Boost",
                ["cmake", "-S", REPO, "-B", work / "without-boost", "-DTHREELC_CUDA=OFF",
                 "-DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON"],
                timeout=300, env=clean_env(), expect_ok=False)
    output = words(proc.stdout + proc.stderr)
    assert "threelc: Boost not found (Boost.Asio's headers, 1.74 or newer)" in output, \
        output[-4000:]
    assert "apt-get install libboost-dev" in output, output[-4000:]
    assert "-DBoost_ROOT=<prefix>" in output, output[-4000:]


def test_cmake_names_gtest_for_the_tests_and_leaves_ucx_out(work):
    proc = step("cmake without GoogleTest and UCX",
                ["cmake", "-S", REPO, "-B", work / "without-gtest-ucx", "-DTHREELC_CUDA=OFF",
                 "-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON", "-DCMAKE_DISABLE_FIND_PACKAGE_ucx=ON"],
                timeout=300, env=clean_env(), expect_ok=False)
    output = words(proc.stdout + proc.stderr)
    assert "threelc: UCX transport: OFF (ucx not found" in output, output[-4000:]
    assert "libucx-dev" in output, output[-4000:]
    assert "threelc: GTest not found (GoogleTest, only for the tests)" in output, output[-4000:]
    assert "apt-get install libgtest-dev" in output, output[-4000:]
    assert "-DTHREELC_BUILD_TESTS=OFF" in output, output[-4000:]
