"""Every public symbol of the SDK (`Understudy`) has a documentation comment: the symbol graph of
the module the suite just built is extracted and checked (scripts/check_sdk_docs.py; `make docs`
builds the DocC archives the same way). No network."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_public_sdk_symbol_is_documented(understudy, tmp_path):
    extract = shutil.which("swift-symbolgraph-extract") or "/opt/swift/usr/bin/swift-symbolgraph-extract"
    if not os.path.exists(extract):
        pytest.skip("swift-symbolgraph-extract is not installed")
    bin_dir = pathlib.Path(understudy).parent
    info = json.loads(subprocess.run(["swift", "-print-target-info"], capture_output=True, text=True,
                                     check=True).stdout)
    command = [extract, "-module-name", "Understudy", "-I", str(bin_dir / "Modules"),
               "-target", info["target"]["triple"], "-minimum-access-level", "public",
               "-output-dir", str(tmp_path)]
    for module_dir in sorted((ROOT / "CModules").iterdir()):
        command += ["-I", str(module_dir)]
    command += ["-Xcc", "-I/usr/include/opus", "-Xcc", f"-I{ROOT}/CModules/CAudioProcessing/include",
                "-Xcc", f"-fmodule-map-file={bin_dir}/CAudioProcessing.build/module.modulemap"]
    extracted = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert extracted.returncode == 0, extracted.stderr[-3000:]
    check = subprocess.run([sys.executable, str(ROOT / "scripts/check_sdk_docs.py"), str(tmp_path), "Understudy"],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
