#!/usr/bin/env python3
"""The package's pytest suite as ctest's python.pytest test.

Exits 77, which ctest reports as skipped (SKIP_RETURN_CODE in
python/CMakeLists.txt), when pytest is not installed, so that a build with
the Python package but without pytest has no failing test.

  python3 python/run_pytest.py python/tests   # PYTHONPATH=<build>/python
"""
import importlib.util
import os
import sys

# This file's folder holds the source package python/flash, without its
# extension: keep it off the path, so that `import flash` finds the build
# tree's (PYTHONPATH), as `python -m pytest` run from the build tree does.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

if importlib.util.find_spec("pytest") is None:
    print("python.pytest skipped: pytest is not installed (pip install pytest)")
    sys.exit(77)

import pytest  # noqa: E402

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
