"""Run a command with real read-only / full file systems and a loopback-only network, for the bad-input tests.

Run it inside a private mount + network namespace (`unshare -m -n --propagation private python
tests/fsjail.py ...`): every mount made here disappears with the namespace, nothing outside is touched.

  --net                 bring up `lo` (the new network namespace has nothing else: no DNS server, no route)
  --ro DIR              bind-mount DIR onto itself read-only (the directory's content stays inspectable after)
  --tmpfs DIR:SIZE      mount a tmpfs of SIZE (e.g. 64k) on DIR
  --seed SRC:DIR        copy the files of SRC into DIR (after the mounts)
  --fill DIR            fill the file system holding DIR completely (ENOSPC for the next write)
  --manifest OUT        after the command: write {relative path: sha256} of every --tmpfs DIR to OUT (JSON)
  -- ARGV...            the command (its exit status is this script's)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def _run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)


def _fill(directory: Path) -> None:
    n = 0
    while True:
        try:
            with open(directory / f".filler-{n}", "wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
        except OSError:
            pass
        n += 1
        if n > 4:
            break
    # Also use up inodes' small leftovers: tiny files until even those fail.
    for i in range(64):
        try:
            with open(directory / f".filler-small-{i}", "wb") as f:
                f.write(b"\0" * 512)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            break


def _manifest(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.startswith(".filler-"):
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def main() -> int:
    if "--" not in sys.argv:
        print("fsjail: missing -- ARGV", file=sys.stderr)
        return 2
    i = sys.argv.index("--")
    own, argv = sys.argv[1:i], sys.argv[i + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", action="store_true")
    ap.add_argument("--ro", action="append", default=[])
    ap.add_argument("--tmpfs", action="append", default=[])
    ap.add_argument("--seed", action="append", default=[])
    ap.add_argument("--fill", action="append", default=[])
    ap.add_argument("--manifest")
    a = ap.parse_args(own)
    if a.net:
        _run(["ip", "link", "set", "lo", "up"])
    tmpfs_dirs = []
    for spec in a.tmpfs:
        d, size = spec.rsplit(":", 1)
        Path(d).mkdir(parents=True, exist_ok=True)
        _run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", d])
        tmpfs_dirs.append(Path(d))
    for spec in a.seed:
        src, dst = spec.split(":", 1)
        for p in Path(src).iterdir():
            if p.is_file():
                shutil.copy2(p, Path(dst) / p.name)
    for d in a.ro:
        _run(["mount", "--bind", d, d])
        _run(["mount", "-o", "remount,bind,ro", d])
    for d in a.fill:
        _fill(Path(d))
    rc = subprocess.call(argv)
    if a.manifest:
        Path(a.manifest).write_text(json.dumps({str(d): _manifest(d) for d in tmpfs_dirs}))
    return rc


if __name__ == "__main__":
    sys.exit(main())
