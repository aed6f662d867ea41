"""`python -m tui.sim {serve|bench serve|hub} ...` — argv-compatible with the `vllm` CLI."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    prog = "vllm"
    if not args or args[0] in ("-h", "--help"):
        print(f"usage: {prog} {{serve,bench,hub,stand-in}} ...\n\nspecdec-tui's simulated vLLM (serve, bench serve), "
              "loopback Hugging Face hub (hub) and stand-in platform (stand-in --profile FILE).")
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd == "serve":
        from .serve import main as serve_main

        return serve_main(rest)
    if cmd == "bench":
        if not rest or rest[0] != "serve":
            print(f"{prog} bench: error: argument bench_type: invalid choice: {rest[0] if rest else ''!r} "
                  "(choose from 'serve')", file=sys.stderr)
            return 2
        from .bench import main as bench_main

        return bench_main(rest[1:])
    if cmd == "stand-in":
        from .standin import main as standin_main

        return standin_main(rest)
    if cmd == "hub":
        from .hub import main as hub_main

        return hub_main(rest)
    if cmd in ("--version", "-v"):
        from .config import sim_config

        print(sim_config()["vllm_version"])
        return 0
    print(f"{prog}: error: argument subparser: invalid choice: {cmd!r} (choose from 'serve', 'bench', 'hub', 'stand-in')",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
