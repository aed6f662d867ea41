"""Steps `baseline` and `eagle3`: launch `vllm serve`, follow the compile log, wait for readiness,
smoke-test, benchmark with `vllm bench serve`, stop.

The same code drives the real vLLM and the simulator; it only sees a process, its output and its port.
"""

from __future__ import annotations

import dataclasses

import asyncio
import json
import re
import time
from typing import Any

import httpx

from tui.core.serverlog import diagnostics as dg
from tui.core.plan import build as plan
from tui.core.plan.commands import base_url, format_command, speculative_settings, target_model
from tui.core.events import Command, Notice
from tui.core.serverlog.logwatch import ServeLogWatcher, cache_counts
from tui.core.proc.supervisor import ManagedProcess, port_free, port_holder, wait_port_free
from tui.core.host.sysinfo import bind_problem
from tui.core.profile.release_rules import launch_problems
from tui.core.profile.sections import SpeculativeSettings
from tui.core.steps.base import FactRecorder, StepContext, StepResult
from tui.core.steps.bench import prepare_bench_dataset, run_benchmark, vllm_version
from tui.core.steps.benchrun import stop_runner

HEALTH_POLL_S = 1.0
DEATH_WAIT_S = 15.0  # after a failed first request: how long to wait for a dying server to exit
NOT_LOSSLESS = ("rejection_sample_method = \"synthetic\" accepts each draft token by a draw at the configured rates, "
                "not by the target's choice, so greedy output is expected to differ from the baseline's")


def synthetic_sampling(spec: SpeculativeSettings | None) -> bool:
    """vLLM's synthetic rejection sampling: acceptance set by the profile, output no longer the target's."""
    return spec is not None and spec.extra.get("rejection_sample_method") == "synthetic"


def _counting_check(prompt: str, text: str) -> tuple[bool, str]:
    """Does `text` continue the count at the end of `prompt`? (True, why) / (False, why)."""
    m = re.search(r"(\d+)\s*$", prompt.strip())
    words = text.split()
    if not m:
        return (bool(text.strip()), "non-empty reply" if text.strip() else "empty reply")
    n = int(m.group(1))
    if not words:
        return False, "empty reply"
    complete = words if text[-1:].isspace() else words[:-1]
    expected = [str(n + 1 + i) for i in range(len(words))]
    if not complete:
        complete = words
    ok = complete == expected[: len(complete)]
    if not text[-1:].isspace() and len(words) > len(complete):
        ok = ok and expected[len(words) - 1].startswith(words[-1])
    return ok, ("continues the count" if ok else f"expected {' '.join(expected[:5])} …")


class ServerRun:
    def __init__(self, ctx: StepContext, step: str, speculative: SpeculativeSettings | bool | None,
                 profile: Any = None):
        """`speculative`: the server's speculative settings (an arm's `Arm.speculative`; True for the profile's
        own; False or None for the baseline). `profile`: the run's profile, or one with another [server] table
        (a parallel arm's port and cores: Profile.with_server)."""
        self.ctx = ctx
        self.step = step
        self.prof = profile if profile is not None else ctx.profile
        self.spec = speculative_settings(self.prof, speculative)
        self.speculative = self.spec is not None
        self.facts = FactRecorder(ctx, step)
        self.url = base_url(self.prof)
        self.proc: ManagedProcess | None = None
        self.platform = getattr(self.prof, "platform", None) or self.prof.data.get("platform", "neuron")
        self.watcher = ServeLogWatcher(ctx.emit, step, speculative=speculative, verbose_lines=True,
                                       platform=self.platform)
        self.result_facts: dict[str, Any] = {}
        self._stopped = False
        self.vllm_version: str | None = None
        self.dataset_path = ""
        self.served_name = target_model(self.prof, ctx.ph)  # placeholders resolved, as vLLM serves it
        self.bench_runner: Any = None  # the arm's warm bench runner (steps/benchrun.py), while it runs
        self.bench_warm_off = ""  # why this arm's benches run one process each after all (steps/benchrun.py)

    # -- helpers -----------------------------------------------------------------------------------
    def diag(self, d: Any) -> None:
        self.ctx.emit(d)

    def serve_facts(self) -> dg.ServeFacts:
        env = self.proc.env if self.proc is not None else self.ctx.environ
        envf = self.ctx.shared.get("env") or {}
        facts = dg.ServeFacts.from_profile(self.prof, self.spec, env, envf.get("vllm_python"))
        return dataclasses.replace(facts, cache_key=self.watcher.last_cache_miss if self.watcher else None,
                                   cache_dir=envf.get("compile_cache_dir"))

    def _child_env(self, extra: dict[str, str]) -> dict[str, str]:
        env = dict(self.ctx.environ)
        explicit = self.prof.server.env
        for k, v in extra.items():
            # The profile's own env wins; the engine's timeout defaults never override the operator's.
            if k in explicit or k not in env:
                env[k] = v
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    # -- launch ---------------------------------------------------------------------------------------
    async def launch(self) -> bool:
        s = self.prof.server
        if not port_free(s.host, s.port):
            problem = bind_problem(s.host, s.port)  # which one failed: the name, the address or the port
            if problem is not None and problem[0] != "in-use":
                self.facts.add("server address", f"{s.host}:{s.port}", "fail", problem[1], problem[2])
                return False
            # A previous server of ours may still be releasing it.
            if not await wait_port_free(s.host, s.port, timeout_s=5):
                holder = port_holder(s.port)
                who = f" by pid {holder[0]} ({holder[1][:120]})" if holder else ""
                self.facts.add("port", f"{s.host}:{s.port}", "fail", f"already in use{who}",
                               "stop that process or choose another server.port")
                self.diag(dg.make("port-in-use", self.step, [f"{s.host}:{s.port} is in use{who}"],
                                  host=s.host, port=s.port))
                return False
        for path, text in launch_problems(self.prof, self.spec, self.vllm_version, dict(self.ctx.environ)):
            self.facts.add(path, f"refused by vLLM {self.vllm_version}", "fail", text)  # nothing is started
            return False
        argv = plan.serve_argv(self.prof, self.spec, self.vllm_version, self.ctx.ph)
        extra_env = plan.serve_env(self.prof, self.ctx.ph)
        env = self._child_env(extra_env)
        cmd_text = format_command(argv, extra_env)
        self.ctx.emit(Command(self.step, "serve", tuple(argv), cmd_text))
        self.ctx.run.write_text(f"{self.step}.command.sh", "#!/usr/bin/env bash\n" + cmd_text + "\n")
        self.proc = ManagedProcess(argv, env, self.ctx.run.file(f"{self.step}.serve.log"),
                                   on_line=self.watcher.on_line, grace_s=float(s.stop_grace_s),
                                   on_stop=self.watcher.stopping)
        try:
            await self.proc.start()
        except (OSError, ValueError) as exc:
            self.facts.add("launch", argv[0], "fail", f"cannot start: {exc}",
                           "check server.command in the profile (is vllm on PATH?)")
            return False
        self.ctx.cleanups.append(self.proc)
        self.ctx.emit(Notice(self.step, "info", f"launched pid {self.proc.proc.pid if self.proc.proc else '?'}; "
                                                 f"log: {self.proc.log_path}"))
        return True

    async def wait_ready(self) -> bool:
        assert self.proc is not None and self.proc.proc is not None
        timeout = float(self.prof.server.startup_timeout_s)
        t0 = time.monotonic()
        exited = asyncio.ensure_future(self.proc.proc.wait())
        ready_wait = asyncio.ensure_future(self.watcher.ready_event.wait())
        ready_by = ""
        foreign = ""  # who answered /health instead of the launched server, when someone did
        async with httpx.AsyncClient(timeout=httpx.Timeout(2.0)) as client:
            try:
                while True:
                    if exited.done():  # the child's exit decides at once, whatever answers on its port
                        break
                    if self.watcher.ready:
                        ready_by = "log: Application startup complete."
                        break
                    try:
                        r = await client.get(self.url + "/health")
                        if r.status_code == 200:
                            owned, holder = await asyncio.to_thread(self._socket_owner)
                            if owned is not False:
                                ready_by = "GET /health → 200" + ("" if owned else
                                                                   " (the socket's owner could not be checked)")
                                break
                            if not foreign:
                                foreign = self._foreign_listener(holder)
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() - t0 > timeout:
                        break
                    await asyncio.wait([exited, ready_wait], timeout=HEALTH_POLL_S,
                                       return_when=asyncio.FIRST_COMPLETED)
                if not ready_by and not exited.done():
                    # Timed out.
                    self.watcher.finish(failed=True)
                    self._record_failed_startup()
                    self.facts.add("startup", f"not ready after {timeout:.0f}s", "fail",
                                   f"last phase: {self.watcher.current_phase or 'none'}"
                                   + (f"; {foreign}" if foreign else ""),
                                   "raise server.startup_timeout_s and VLLM_ENGINE_READY_TIMEOUT_S"
                                   + (" (and stop the other server on the port)" if foreign else ""))
                    self.diag(dg.startup_timeout(self.step,
                                                 [f"no readiness after {timeout:.0f}s (server.startup_timeout_s)",
                                                  f"last phase: {self.watcher.current_phase or 'none'}"],
                                                 target_model(self.prof, self.ctx.ph), timeout))
                    return False
                if exited.done():
                    await self.proc.wait_output_done()
                    self.watcher.finish(failed=True)
                    self._record_failed_startup()
                    rc = exited.result()
                    self._diagnose_exit(rc)
                    return False
                # The log marker can precede the first accept() by a moment: wait for /health.
                while ready_by.startswith("log") and not exited.done() and time.monotonic() - t0 < timeout:
                    try:
                        if (await client.get(self.url + "/health")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.1)
                # /v1/models must list the target.
                try:
                    r = await client.get(self.url + "/v1/models", timeout=10)
                    data = r.json().get("data", []) if r.status_code == 200 else []
                except (httpx.HTTPError, ValueError) as exc:
                    data = []
                    self.facts.add("/v1/models", "unreachable", "fail", str(exc), "check the server log")
                    return False
                ids = [m.get("id") for m in data] + [m.get("root") for m in data]
                target = target_model(self.prof, self.ctx.ph)
                if target not in ids:
                    self.facts.add("/v1/models", ", ".join(str(i) for i in ids) or "empty", "fail",
                                   f"does not list {target}", "check models.target / --served-model-name")
                    return False
                self.served_name = next((m.get("id") for m in data if target in (m.get("id"), m.get("root"))), target)
            finally:
                for fut in (exited, ready_wait):
                    if not fut.done():
                        fut.cancel()
        startup_s = time.monotonic() - t0
        self.proc.mark_ready()  # from now on a stop gives it the full server.stop_grace_s after SIGINT
        # Wait for the log to reach the ready marker (the pipeline closes the last phase there).
        if not self.watcher.ready:
            try:
                await asyncio.wait_for(self.watcher.ready_event.wait(), timeout=3)
            except asyncio.TimeoutError:
                pass
        summ = self.watcher.summary()
        self.result_facts["startup"] = {"seconds": round(startup_s, 2), "ready_by": ready_by, **summ}
        hits, misses = summ.get("cache_hits", 0), summ.get("cache_misses", 0)
        cache = "compile " + cache_counts(hits, misses)
        self.facts.add("startup", f"ready in {startup_s:.1f}s", "pass", f"{ready_by}; {cache}")
        return True

    def _socket_owner(self) -> tuple[bool | None, tuple[int, str] | None]:
        """Whose socket answered on the server's port: (True, None) the launched server's (its process tree);
        (False, (pid, command)) another process's; (None, None) cannot tell (no listener this user can see: another
        user's or root's process). Blocking (psutil): run it in a thread."""
        assert self.proc is not None
        port = int(self.prof.server.port)
        owned = self.proc.listens_on(port)
        if owned is not False:
            return owned, None
        holder = port_holder(port)
        if holder is None:
            return None, None
        if holder[0] in {p.pid for p in self.proc.tree()}:  # it bound between the two looks
            return True, None
        return False, holder

    def _foreign_listener(self, holder: tuple[int, str] | None) -> str:
        """/health answered, but from another process's socket: say whose (once) and return that sentence;
        readiness waits for our own server."""
        s = self.prof.server
        who = f"pid {holder[0]} (`{holder[1][:120]}`)" if holder else "another process"
        text = (f"{s.host}:{s.port} answered /health, but its listening socket belongs to {who}, not to the launched "
                f"server (pid {self.proc.proc.pid if self.proc and self.proc.proc else '?'})")
        self.ctx.emit(Notice(self.step, "warning", text + ": that answer does not count as ready"))
        return text

    def _record_failed_startup(self) -> None:
        """A startup that failed keeps its phases (the failed one marked) for the report and `--open`."""
        self.result_facts["startup"] = {"seconds": None, "failed_phase": self.watcher.failed_phase,
                                        **self.watcher.summary()}

    def _diagnose_exit(self, rc: int) -> None:
        root = self.watcher.root_cause()
        s = self.prof.server
        for d in dg.from_log_signatures(self.step, self.watcher.error_signatures(), root,
                                        self.watcher.last_lines(8), rc, s.tensor_parallel_size, s.host, s.port,
                                        serve=self.serve_facts()):
            if d.id == "port-in-use":  # name who has the port (vLLM's line does not)
                holder = port_holder(int(s.port))
                if holder:
                    d = dataclasses.replace(d, evidence=(*d.evidence, f"{s.host}:{s.port} is held by pid "
                                                                      f"{holder[0]} ({holder[1][:120]})"))
            self.diag(d)
        detail = f"root cause: {root}" if root else f"exit code {rc}"
        self.facts.add("startup", f"server exited with code {rc}", "fail", detail,
                       f"see {self.step}.serve.log in the run directory")

    # -- smoke test -------------------------------------------------------------------------------------
    async def smoke(self) -> bool:
        sm = self.prof.smoke
        payload = {"model": self.served_name, "prompt": sm.prompt,
                   "max_tokens": sm.max_tokens, "temperature": 0}
        t0 = time.monotonic()
        try:
            async with httpx.AsyncClient(timeout=httpx.Timeout(120.0)) as client:
                r = await client.post(self.url + "/v1/completions", json=payload)
            body = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            self.facts.add("smoke test", "no reply", "fail", str(exc), "check the server log")
            await self._diagnose_death(None)
            return False
        latency = time.monotonic() - t0
        text = ""
        if r.status_code == 200:
            try:
                text = body["choices"][0]["text"]
            except (KeyError, IndexError, TypeError):
                text = ""
        ok, why = _counting_check(sm.prompt, text) if r.status_code == 200 else (False, f"HTTP {r.status_code}")
        record = {"request": payload, "status": r.status_code, "response": body, "text": text, "passed": ok,
                  "why": why, "latency_s": round(latency, 4)}
        self.ctx.run.write_json(f"{self.step}.smoke.json", record)
        self.result_facts["smoke"] = {"text": text, "passed": ok}
        self.facts.add("smoke test", repr(text), "pass" if ok else "fail", why,
                       "" if ok else "compare with the tutorial's expected \"6 7 8 9 10 \"")
        if not ok and not (r.status_code != 200 and await self._diagnose_death(r.status_code)):
            self.diag(dg.make("smoke-test-failed", self.step, [f"prompt: {sm.prompt!r}", f"reply: {text!r}", why]))
        if self.speculative:
            base_text = self._baseline_smoke_text()
            if base_text is not None and synthetic_sampling(self.spec):
                self.facts.add("lossless check", "not applicable", "info", NOT_LOSSLESS)
            elif base_text is not None:
                diags = dg.greedy_rule(self.step, base_text, text)
                for d in diags:
                    self.diag(d)
                self.facts.add("lossless check", "same as baseline" if not diags else "differs from baseline",
                               "pass" if not diags else "warn",
                               f"baseline {base_text!r}", "" if not diags else diags[0].remedy)
                self.result_facts["smoke"]["matches_baseline"] = not diags
        return ok

    async def _diagnose_death(self, http_status: int | None) -> bool:
        """After a failed first request: did the engine die serving it? Waits up to DEATH_WAIT_S for the
        server to exit, then diagnoses from the log's post-readiness errors, the HTTP status and the exit code.
        True when a diagnosis was raised."""
        proc = self.proc
        rc: int | None = None
        dying = http_status is None or http_status >= 500 or bool(self.watcher.errors_after_ready())
        if dying and proc is not None and proc.proc is not None:
            try:
                rc = await asyncio.wait_for(asyncio.shield(proc.proc.wait()), timeout=DEATH_WAIT_S)
                await asyncio.wait_for(proc.wait_output_done(), timeout=5)
            except asyncio.TimeoutError:
                rc = proc.returncode
        errors = self.watcher.errors_after_ready()
        if rc is None and not errors:
            return False
        diags = dg.first_request_death(self.step, self.serve_facts(), errors, http_status, rc,
                                       self.watcher.root_cause(), self.watcher.aux_layers_line)
        for d in diags:
            self.diag(d)
        if rc is not None:
            self.facts.add("server", f"exited with code {rc} after the first request", "fail",
                           diags[0].evidence[0] if diags and diags[0].evidence else "",
                           diags[0].remedy if diags else f"see {self.step}.serve.log in the run directory")
        return bool(diags)

    def _baseline_smoke_text(self) -> str | None:
        sh = self.ctx.shared.get("baseline", {}).get("smoke")
        if isinstance(sh, dict) and "text" in sh:
            return sh["text"]
        p = self.ctx.run.file("baseline.smoke.json")
        if p.exists():
            try:
                return json.loads(p.read_text()).get("text")
            except (OSError, ValueError):
                return None
        return None

    # -- stop ----------------------------------------------------------------------------------------------
    async def stop(self) -> None:
        await stop_runner(self.ctx, self)  # the arm's warm bench runner goes with its server
        if self._stopped or self.proc is None:
            return
        self._stopped = True
        s = self.prof.server
        t0 = time.monotonic()
        self.ctx.emit(Notice(self.step, "info", "stopping the server (SIGINT, then SIGTERM, then SIGKILL)"))
        # From here on vLLM's shutdown traceback (EngineDeadError) is our own doing: not an error.
        self.watcher.stopping()
        rc = await self.proc.stop()
        self.ctx.forget(self.proc)
        free = await wait_port_free(s.host, s.port, timeout_s=30)
        self.result_facts["stop"] = {"exit_code": rc, "seconds": round(time.monotonic() - t0, 2), "port_free": free}
        if not free:
            self.facts.add("stop", f"port {s.port} still busy", "warn", "", "check for a stray server process")

async def run_server_step(ctx: StepContext, step: str, speculative: bool) -> StepResult:
    sr = ServerRun(ctx, step, speculative)
    # Checks that must fail before a long launch: the bench's vLLM version and its dataset (on vLLM >= 0.32
    # the sonnet prompts built as a custom JSONL).
    sr.vllm_version = await vllm_version(ctx)
    if not await prepare_bench_dataset(ctx, sr):
        return sr.facts.result(sr.result_facts)
    try:
        if not await sr.launch():
            return sr.facts.result(sr.result_facts)
        if not await sr.wait_ready():
            return sr.facts.result(sr.result_facts)
        if not await sr.smoke():
            return sr.facts.result(sr.result_facts)
        await run_benchmark(ctx, sr)
        return sr.facts.result(sr.result_facts)
    finally:
        await sr.stop()
