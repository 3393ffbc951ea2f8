#!/usr/bin/env python3
"""Per-kernel SASS counts of a build, and what changed between two builds,
without a GPU.

Reads the device code of the object files (or archives) under each build
folder with cuobjdump and prints, per build, how many kernels there are and
how many touch local memory (LDL/STL, i.e. spills); given two builds, the
kernels whose instructions differ (addresses and encodings ignored), whose
LDL/STL count went up or down, and whose HGMMA count changed.

  scripts/sass-diff.py build/base            # one build: counts, kernels with LDL/STL
  scripts/sass-diff.py build/base build/new  # two builds: the differences
  scripts/sass-diff.py --filter 'FwdTraitsILi64E' build/base build/new

Objects: by default CMakeFiles/flash_sm90.dir/**/*.o under the build
folder (the Hopper kernels, built by `cmake --build <dir> --target
flash_sm90`); --glob picks others (e.g. 'libflash.a'). cuobjdump comes
from $CUDA_HOME/bin, PATH, or the nvidia-cuda-cuobjdump wheel
(`pip download --no-deps nvidia-cuda-cuobjdump`, unzip, use
nvidia/cu13/bin/cuobjdump) where the toolkit lacks it.
"""
import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys

FUNC = re.compile(r"Function : (\S+)")
INSN = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def cuobjdump():
    for d in (os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/bin", None):
        exe = shutil.which("cuobjdump", path=d) if d else shutil.which("cuobjdump")
        if exe:
            return exe
    sys.exit("cuobjdump not found: set CUDA_HOME or PATH (see this script's docstring for the wheel)")


def kernels(build, pattern):
    files = sorted(glob.glob(os.path.join(build, pattern), recursive=True))
    if not files:
        sys.exit(f"{build}: no files match {pattern}")
    exe = cuobjdump()
    out = {}
    for f in files:
        sass = subprocess.run([exe, "--dump-sass", f], capture_output=True, text=True).stdout
        name, insns = None, []
        for line in sass.splitlines() + ["Function : <end>"]:
            m = FUNC.search(line)
            if m:
                if name is not None:
                    text = "\n".join(insns)
                    out[name] = {
                        "hash": hashlib.md5(text.encode()).hexdigest(),
                        "local": sum(1 for i in insns if re.search(r"\b(LDL|STL)\b", i)),
                        "hgmma": sum(1 for i in insns if re.search(r"\b[HQ]GMMA\b", i)),
                        "insns": len(insns),
                    }
                name, insns = m.group(1), []
                continue
            m = INSN.match(line)
            if m and name is not None:
                insns.append(m.group(1))
    return out


def demangle(names):
    exe = shutil.which("c++filt")
    if not exe:
        return {n: n for n in names}
    res = subprocess.run([exe], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, res))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", help="one or two build folders")
    ap.add_argument("--glob", default="CMakeFiles/flash_sm90.dir/**/*.o", help="object files under each build")
    ap.add_argument("--filter", default="", help="regex on the mangled kernel name")
    ap.add_argument("--list", type=int, default=20, help="rows to print per list")
    a = ap.parse_args()
    if len(a.builds) > 2:
        ap.error("one or two build folders")
    pat = re.compile(a.filter)
    runs = [{k: v for k, v in kernels(b, a.glob).items() if pat.search(k)} for b in a.builds]
    for b, r in zip(a.builds, runs):
        spilled = sum(1 for v in r.values() if v["local"])
        print(f"{b}: {len(r)} kernels, {spilled} with LDL/STL ({sum(v['local'] for v in r.values())} instructions)")
    if len(runs) == 1:
        rows = sorted((v["local"], k) for k, v in runs[0].items() if v["local"])[::-1][: a.list]
        names = demangle([k for _, k in rows])
        for n, k in rows:
            print(f"  {n:5d}  {names[k]}")
        return
    base, new = runs
    common = sorted(set(base) & set(new))
    only = [sorted(set(base) - set(new)), sorted(set(new) - set(base))]
    changed = [k for k in common if base[k]["hash"] != new[k]["hash"]]
    more = [k for k in common if new[k]["local"] > base[k]["local"]]
    less = [k for k in common if new[k]["local"] < base[k]["local"]]
    hg = [k for k in common if new[k]["hgmma"] != base[k]["hgmma"]]
    print(f"common {len(common)}; SASS changed {len(changed)}; LDL/STL more {len(more)}, less {len(less)}; "
          f"HGMMA count changed {len(hg)}; only in the first {len(only[0])}, only in the second {len(only[1])}")
    names = demangle(sorted(set(changed) | set(only[0]) | set(only[1])))
    for title, keys in (("LDL/STL more", more), ("LDL/STL less", less), ("HGMMA changed", hg)):
        if keys:
            print(f"{title}:")
            for k in keys[: a.list]:
                print(f"  {base[k]['local']:5d} -> {new[k]['local']:5d} LDL/STL, HGMMA {base[k]['hgmma']} -> "
                      f"{new[k]['hgmma']}  {names[k]}")
    if changed:
        print("SASS changed (instructions before -> after):")
        for k in changed[: a.list]:
            print(f"  {base[k]['insns']:6d} -> {new[k]['insns']:6d}  {names[k]}")
        if len(changed) > a.list:
            print(f"  ... and {len(changed) - a.list} more")


if __name__ == "__main__":
    main()
