"""How an arm's benches run: in one warm process per arm, or one process per bench.

`vllm bench serve` spends most of a short bench importing (vLLM 0.32 on CPU: 12.5 s before its first request, 5 s
benchmarking). Where the bench command is a Python program, an arm's benches run in one warm runner
(tui/tools/warm_bench.py, started with the interpreter that runs the command): it imports the bench's code once and
runs each bench from exactly the argv the plan shows, as that program's `__main__`, so the code path is the
command's own. Where that cannot be done, each bench is its own process, as before. The rule is about what the
command is (`bench_mode`), never about what it plays:

- `benchmark.warm = "off"`: one process per bench;
- an arm that runs one bench (a two-arm run, or a tune run of one workload, one level and one repeat): nothing to
  share, one process;
- VLLM_USE_RUST_BENCH set: vLLM hands `bench serve` to its Rust binary (an exec), one process per bench;
- the command's first word is a Python console script (a shebang naming a Python, as pip writes `vllm`): warm,
  the script run as `__main__` with the bench's arguments;
- the command is a Python interpreter with `-m MODULE` or a script (and only flags that take no value, or -X / -W
  with theirs, before it): warm, the module or script run as `__main__`;
- anything else (a shell wrapper, a binary, `python -c`, a command not found): one process per bench, saying why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.core.host.interpreter import find_server_interpreter
from tui.core.plan.arms import is_tune, levels_of, repeats_of, workloads_of
from tui.core.plan.commands import Placeholders, specdec_tools_dir
from tui.core.profile.model import Profile

RUNNER = "warm_bench.py"  # in tui/tools/
SIMPLE_FLAGS = frozenset({"-b", "-bb", "-B", "-d", "-E", "-i", "-I", "-O", "-OO", "-P", "-q", "-s", "-S", "-u", "-v"})
VALUE_FLAGS = frozenset({"-X", "-W"})


@dataclass(frozen=True)
class BenchMode:
    """warm: the arm's benches run in one warm runner; else `why` says why each is its own process. For a warm
    mode: the runner's interpreter (`python`, with its flags), what a bench argv runs (`kind` "path": the file
    `target` as __main__; "module": the module `target`) and how many leading words of a bench argv that stands for
    (`skip`: the rest are its arguments)."""

    warm: bool
    why: str = ""
    python: tuple[str, ...] = ()
    kind: str = ""
    target: str = ""
    skip: int = 0
    known: bool = True  # False: the command could not be looked at here (the plan shown before a run)

    def runner_argv(self) -> list[str]:
        """The runner's command (the nonce is added when it starts)."""
        return [*self.python, str(specdec_tools_dir() / RUNNER)]

    def job(self, argv: list[str] | tuple[str, ...]) -> dict[str, Any]:
        """The runner's job for one bench argv."""
        return {"kind": self.kind, "target": self.target, "args": list(argv[self.skip:])}

    def warm_up_argv(self, argv: list[str] | tuple[str, ...]) -> list[str]:
        """The warm-up of a runner whose benches look like `argv`: the bench command's own `bench serve --help`
        (it imports the bench's code and prints its usage, which the runner keeps back)."""
        return [*argv[:self.skip], *bench_words(argv[self.skip:]), "--help"]

    def warm_up_job(self, argv: list[str] | tuple[str, ...]) -> dict[str, Any]:
        return self.job(self.warm_up_argv(argv))

    def text(self) -> str:
        """One line for the plan, commands.json and report.md."""
        if self.warm:
            name = Path(self.target).name if self.kind == "path" else self.target
            return (f"one warm process per arm runs its benches ({name}'s own bench code, imported once; each bench "
                    "from exactly the argv shown)")
        if not self.known:
            return ("one warm process per arm where the bench command is a Python program, else one per bench "
                    f"({self.why})")
        return f"one process per bench ({self.why})"

    def as_dict(self) -> dict[str, Any]:
        return {"warm": self.warm, "why": self.why, "text": self.text()}


def bench_words(args: list[str] | tuple[str, ...]) -> list[str]:
    """The subcommand words of a bench's arguments (["bench", "serve"]): the words before the first flag."""
    out: list[str] = []
    for a in args:
        if a.startswith("-"):
            break
        out.append(a)
    return out


def benches_per_arm(profile: Profile) -> int:
    if not is_tune(profile):
        return 1
    return len(workloads_of(profile)) * len(levels_of(profile) or [None]) * repeats_of(profile)


def _rust_bench(environ: dict[str, str]) -> bool:
    return environ.get("VLLM_USE_RUST_BENCH", "").strip().lower() not in ("", "0", "false", "no", "off")


def bench_mode(profile: Profile, environ: dict[str, str], ph: Placeholders | None = None,
               cwd: str | None = None) -> BenchMode:
    """The bench mode of a run of `profile` whose benches see `environ` (the bench's environment: its PATH finds
    the command)."""
    ph = ph or Placeholders()
    setting = profile.benchmark.warm
    if setting == "off":
        return BenchMode(False, 'benchmark.warm = "off"')
    if benches_per_arm(profile) < 2:
        return BenchMode(False, "each server runs one bench")
    if _rust_bench(environ):
        return BenchMode(False, "VLLM_USE_RUST_BENCH is set: vLLM hands `bench serve` to its Rust binary")
    cmd = [ph.resolve(str(x)) for x in profile.server.command]
    interp = find_server_interpreter(cmd[0], environ)
    if interp.path is None:
        return BenchMode(False, f"{interp.error or f'`{cmd[0]}` not found'}: decided at run time", known=False)
    if interp.python is None:
        return BenchMode(False, f"not a Python program the warm runner can run: {interp.error}")
    if interp.how != "interpreter":  # a console script: its shebang's Python runs it with the bench's arguments
        return BenchMode(True, python=tuple(interp.argv), kind="path", target=interp.path, skip=1)
    flags, rest = [], cmd[1:]
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        if rest[0] in SIMPLE_FLAGS:
            flags.append(rest.pop(0))
        elif rest[0] in VALUE_FLAGS and len(rest) > 1:
            flags += [rest.pop(0), rest.pop(0)]
        else:
            return BenchMode(False, f"`{' '.join(cmd)}`: the interpreter flag {rest[0]} is not one the warm runner "
                                    "repeats")
    python = (interp.python, *flags)
    if len(rest) >= 2 and rest[0] == "-m":
        return BenchMode(True, python=python, kind="module", target=rest[1], skip=1 + len(flags) + 2)
    if rest and not rest[0].startswith("-"):
        script = rest[0] if os.path.isabs(rest[0]) else os.path.join(cwd or os.getcwd(), rest[0])
        return BenchMode(True, python=python, kind="path", target=script, skip=1 + len(flags) + 1)
    return BenchMode(False, f"`{' '.join(cmd)}` runs no module or script the warm runner can run")


__all__ = ["BenchMode", "bench_mode", "bench_words", "benches_per_arm"]
