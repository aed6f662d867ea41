"""The stand-in platform of a run: the profile's [stand_in] command started as a supervised child, its one
JSON line read and applied to the run's environment and placeholders (the simulator stands in this way).
A platform is node-local: the Engine (run/engine.py) mixes this in for a run on this host, and a fleet's node
agent (exec/node.py) for its node, so each node of a fleet stands in for its own platform."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tui.core.secrets import redact
from tui.core.proc.supervisor import ManagedProcess

STAND_IN_TIMEOUT_S = 60.0
STAND_IN_GRACE_S = 5.0


class StandIn:
    """Methods of whatever hosts the platform (the Engine, or a fleet's node agent): `self` has profile, ctx, run,
    platform_error, stand_in_notice and _stand_in."""

    # -- stand-in platform ---------------------------------------------------------------------
    async def _start_stand_in(self) -> None:
        """Start the profile's [stand_in] command (a supervised child like a server), read its one JSON line
        {"env": {...}, "unset": [...], "placeholders": {...}, "notice": "..."} and apply it to the run."""
        spec = self.profile.raw.get("stand_in")
        cmd = spec.get("command") if isinstance(spec, dict) else None
        if not cmd:
            if self.profile.simulated:
                self.stand_in_notice = ("this profile has a [simulation] table but no [stand_in] command, so nothing "
                                        "stands in for the platform: the steps check this machine as it is. Add "
                                        '[stand_in] command = ["{python}", "-m", "tui.sim", "stand-in", "--profile", '
                                        '"{run_dir}/profile.toml"] (or extends = "demo") to run on the simulator.')
            return
        argv = [self.ctx.ph.resolve(str(x)) for x in cmd]
        loop = asyncio.get_running_loop()
        first: asyncio.Future[dict[str, Any]] = loop.create_future()
        seen: list[str] = []

        def on_line(line: str, ts: float) -> None:
            if first.done():
                return
            text = line.strip()
            if text.startswith("{"):
                try:
                    msg = json.loads(text)
                except ValueError:
                    msg = None
                if isinstance(msg, dict):
                    first.set_result(msg)
                    return
            if text:
                seen.append(text)

        proc = ManagedProcess(argv, env=dict(self.ctx.environ), log_path=self.run.file("stand-in.log"),
                              on_line=on_line, grace_s=STAND_IN_GRACE_S)
        shown = " ".join(argv)
        try:
            await proc.start()
        except asyncio.CancelledError:
            proc.kill_now()
            raise
        except (FileNotFoundError, OSError) as exc:
            self.platform_error = (f"the profile's [stand_in] command could not be started ({exc}): `{shown}`. "
                                   "Fix [stand_in] command in the profile (the simulator's is "
                                   '["{python}", "-m", "tui.sim", "stand-in", "--profile", "{run_dir}/profile.toml"]).')
            return
        self.ctx.cleanups.append(proc)
        self._stand_in = proc
        waiter = asyncio.ensure_future(proc.wait())
        try:
            done, _ = await asyncio.wait({first, waiter}, timeout=STAND_IN_TIMEOUT_S,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not waiter.done():
                waiter.cancel()
        if first.done():
            self._apply_stand_in(first.result())
            return
        why = (f"exited with status {proc.returncode}" if proc.returncode is not None
               else f"printed no JSON line within {STAND_IN_TIMEOUT_S:.0f} s")
        last = redact(seen[-1][:300]) if seen else "no output"
        self.platform_error = (f"the stand-in platform `{shown}` {why} (last output: {last}); its log is "
                               f"{self.run.file('stand-in.log')}. Fix the [stand_in] command or the cause shown, "
                               "then rerun.")

    def _apply_stand_in(self, msg: dict[str, Any]) -> None:
        self.stand_in_message = msg  # a fleet node hands the same platform to the arms that run on it
        env = self.ctx.environ
        for var in msg.get("unset") or []:
            env.pop(str(var), None)
        for k, v in (msg.get("env") or {}).items():
            env[str(k)] = str(v)
        for k, v in (msg.get("placeholders") or {}).items():
            if hasattr(self.ctx.ph, str(k)):
                setattr(self.ctx.ph, str(k), str(v))
        if msg.get("notice"):
            self.stand_in_notice = str(msg["notice"])
