"""The fleet's parts that need no cluster: what a node sends to the driver (exec/node.py Outbox: logs in whole
lines as they grow, finished files once, progress coalesced, node paths rewritten), the port an arm takes on its
node (exec/ports.py), and the numbers (results/fleet.py: each arm against its own node's baseline, node classes
never pooled, the baseline's node-to-node spread checked against scipy)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from scipy import stats as sst

from tui.core import events as ev
from tui.core.exec.cluster import _routable_address, loopback_as_given
from tui.core.exec.node import Outbox, Remap, coalesce
from tui.core.exec.ports import node_port
from tui.core.host.hostlock import HostLocks, core_claims, port_claim
from tui.core.results import fleet
from tui.core.results.stats import build_matrix


# -- what a node sends ----------------------------------------------------------------------------------------

def test_logs_go_in_whole_lines_and_finished_files_once_after_the_fact_that_names_them(tmp_path: Path):
    out = Outbox(tmp_path, Remap([(str(tmp_path), "/driver/run")]))
    (tmp_path / "a.serve.log").write_bytes("line 1\nline 2 é\npart".encode())
    (tmp_path / "a.sonnet.r1.json").write_text("{}")
    (tmp_path / "state.json").write_text("{}")  # the node's own bookkeeping: never sent
    msg = out.drain()
    assert msg["files"] == [("append", "a.serve.log", "line 1\nline 2 é\n".encode())]  # no half line, no result yet
    out.emit(ev.Fact("a", "sonnet r1", "1.0 tok/s", "pass", f"({tmp_path}/a.sonnet.r1.json)"))
    with open(tmp_path / "a.serve.log", "ab") as f:
        f.write(b" done\n")
    msg = out.drain()
    assert ("put", "a.sonnet.r1.json", b"{}") in msg["files"]
    assert ("append", "a.serve.log", b"part done\n") in msg["files"]
    assert msg["events"][0].detail == "(/driver/run/a.sonnet.r1.json)"  # node paths read as the driver's
    out.emit(ev.Fact("a", "x", "y", "pass"))
    assert out.drain()["files"] == []  # nothing changed: nothing sent again
    (tmp_path / "kept.json").write_text("[1]")
    out.seed(["kept.json"])  # put there by the driver (a continued run's kept result): not sent back
    assert out.drain(final=True)["files"] == []


def test_progress_is_coalesced_to_the_latest_value_per_bar_and_nothing_else_is_dropped():
    evs = [ev.Progress("a", "requests", i, 10, "req") for i in range(5)] + [ev.LogLine("a", "x")] + \
          [ev.Progress("b", "requests", 1, 10, "req"), ev.Progress("a", "requests", 10, 10, "req", done=True)]
    assert coalesce(evs) == [evs[4], evs[5], evs[6], evs[7]]  # a's latest, the log line, b's, a's final


# -- the port an arm takes -------------------------------------------------------------------------------------

def _locks(name: str) -> HostLocks:
    return HostLocks.this_run(f"/driver/{name}", f"specdec-tui --ray ({name})", "tune-demo")


def test_a_loopback_cluster_is_dialled_as_given():
    """Ray turns 127.0.0.1 into this host's routable address before it dials (on a host with a default route a
    cluster on 127.0.0.1 is then missed for minutes); while the app connects, a loopback host stays loopback."""
    services = pytest.importorskip("ray._private.services")
    before = services.resolve_ip_for_localhost
    with loopback_as_given():
        assert services.resolve_ip_for_localhost("127.0.0.1") == "127.0.0.1"
        assert services.resolve_ip_for_localhost("localhost") == "localhost"
        assert services.resolve_ip_for_localhost("10.0.0.5") == "10.0.0.5"
    assert services.resolve_ip_for_localhost is before
    with loopback_as_given(False):
        assert services.resolve_ip_for_localhost is before  # a remote cluster: Ray's own behaviour


def test_a_loopback_address_nothing_listens_on_points_at_the_host_address_that_answers():
    """`--ray 127.0.0.1:PORT` for a head that listens on this host's routable address only (`ray start --head`
    without --node-ip-address): the refusal names the address that answers. Here 127.0.0.2 plays that address."""
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert _routable_address("127.0.0.1", port, node_ip=lambda: "127.0.0.2") == f"127.0.0.2:{port}"
        assert _routable_address("10.0.0.5", port, node_ip=lambda: "127.0.0.2") is None  # not loopback: as given
        assert _routable_address("127.0.0.1", port, node_ip=lambda: "127.0.0.1") is None  # no other address
    assert _routable_address("127.0.0.1", port, node_ip=lambda: "127.0.0.2") is None  # nothing listens there


def test_an_arm_takes_the_first_port_free_on_its_node_and_held_by_no_other_run(tmp_path, monkeypatch):
    """The host-wide locks (tui/core/host/hostlock.py) every run takes: a port another arm (or a run that is not on
    Ray) holds is skipped, and freed when its holder lets go."""
    monkeypatch.setenv("SPECDEC_LOCK_DIR", str(tmp_path / "locks"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]  # busy: in use by this socket
        s.listen()
        first = node_port("127.0.0.1", base, _locks("a"))
        second = node_port("127.0.0.1", base, _locks("b"))  # the first is held (flock) by the arm that took it
        try:
            assert base < first.port < second.port
        finally:
            first.release()
            second.release()
        again = node_port("127.0.0.1", base, _locks("c"))  # released: free again
        assert again.port == first.port
        again.release()
        local = _locks("local run")
        assert local.take([port_claim("127.0.0.1", base + 1)]) is None  # a run on this host, not on Ray, holds it
        skipped = node_port("127.0.0.1", base, _locks("d"))
        assert skipped.port not in (base, base + 1)
        skipped.release()
        local.release()


def test_an_arm_refuses_cores_another_run_on_its_node_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_LOCK_DIR", str(tmp_path / "locks"))
    other = _locks("other run")
    assert other.take(core_claims("neuron", range(0, 16), dict(os.environ))) is None
    with pytest.raises(OSError, match=r"NeuronCores? .*held by .*other run"):
        node_port("127.0.0.1", free_port_base(), _locks("arm"), platform="neuron", cores=range(8, 24),
                  environ=dict(os.environ))
    other.release()
    got = node_port("127.0.0.1", free_port_base(), _locks("arm"), platform="neuron", cores=range(8, 24),
                    environ=dict(os.environ))
    got.release()


def free_port_base() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the numbers -------------------------------------------------------------------------------------------

def _rep(tput: float, node: str | None = None) -> dict:
    r = {"output_throughput": tput, "seed": 0}
    if node:
        r["node"] = node
    return r


HOST = {"instance_type": "trn2.48xlarge", "vllm_version": "0.29.0", "neuron_sdk": "2.33"}


def _node(key: str, **host) -> dict:
    return {"key": key, "id": key * 8, "address": "10.0.0.1", "host": dict(HOST, **host)}


def facts_of(classes_differ: bool = False) -> dict:
    n2_host = {"vllm_version": "0.32.0"} if classes_differ else {}
    bases = {"n1": {"node": _node("n1"), "repeats": {"sonnet": [_rep(100.0, "n1"), _rep(104.0, "n1"),
                                                                  _rep(98.0, "n1")]}},
             "n2": {"node": _node("n2", **n2_host), "repeats": {"sonnet": [_rep(80.0, "n2"), _rep(83.0, "n2"),
                                                                             _rep(79.0, "n2")]}}}
    return {
        "baseline": dict(bases["n1"], nodes=bases),
        "eagle3-k1": {"node": _node("n1"), "repeats": {"sonnet": [_rep(130.0), _rep(126.0), _rep(133.0)]}},
        "eagle3-k2": {"node": _node("n2", **n2_host), "repeats": {"sonnet": [_rep(100.0), _rep(97.0),
                                                                              _rep(104.0)]}},
    }


ARMS = [{"id": "baseline", "kind": "baseline"}, {"id": "eagle3-k1", "kind": "speculative", "method": "eagle3",
                                                  "num_speculative_tokens": 1},
        {"id": "eagle3-k2", "kind": "speculative", "method": "eagle3", "num_speculative_tokens": 2}]


def test_each_arm_is_against_its_own_nodes_baseline():
    f = facts_of()
    fv = fleet.view([a["id"] for a in ARMS], f, ["sonnet"])
    assert fv is not None and fv["baselines"]["eagle3-k2"]["nodes"] == ["n2"]
    m = fleet.matrix([dict(a) for a in ARMS], fv, ["sonnet"], f)
    k2 = m["cells"]["eagle3-k2"]["sonnet"]["speedup"]["ratio"]
    assert k2 == pytest.approx((100 + 97 + 104) / (80 + 83 + 79), rel=1e-4)  # not against n1's 100 tok/s
    k1 = m["cells"]["eagle3-k1"]["sonnet"]["speedup"]["ratio"]
    assert k1 == pytest.approx((130 + 126 + 133) / (100 + 104 + 98), rel=1e-4)
    assert len(m["fleet"]["classes"]) == 1 and m["fleet"]["classes"][0]["nodes"] == ["n1", "n2"]
    # one host: no fleet view, the plain matrix
    assert fleet.view(["baseline"], {"baseline": {"repeats": {}}}, ["sonnet"]) is None
    plain = build_matrix([dict(a) for a in ARMS], f, ["sonnet"])
    assert plain["cells"]["eagle3-k2"]["sonnet"]["speedup"]["ratio"] == pytest.approx(301 / 302, rel=1e-4)


def test_nodes_whose_facts_differ_are_never_pooled():
    f = facts_of(classes_differ=True)
    fv = fleet.view([a["id"] for a in ARMS], f, ["sonnet"])
    m = fleet.matrix([dict(a) for a in ARMS], fv, ["sonnet"], f)
    classes = m["fleet"]["classes"]
    assert [c["nodes"] for c in classes] == [["n1"], ["n2"]]
    assert "vllm_version: 0.32.0 vs 0.29.0" in classes[1]["differs"]
    assert [a["id"] for a in m["arms"]] == ["baseline", "eagle3-k1"]  # the run's matrix: the first class only
    assert [a["id"] for a in classes[1]["matrix"]["arms"]] == ["baseline", "eagle3-k2"]
    assert classes[1]["matrix"]["recommendation"]["sonnet"]["candidate"] in ("eagle3-k2", "baseline", None)
    md = fleet.fleet_markdown(fleet.report_section({"address": "a:1", "nodes": {}}, m))
    assert "never pooled" in md and "differs: vllm_version" in md


def test_an_arm_measured_on_two_nodes_of_one_class_pairs_with_both_baselines_and_one_of_another_is_left_out():
    f = facts_of()
    f["eagle3-k1"]["repeats"]["sonnet"][2]["node"] = "n2"  # a continued run measured repeat 3 on n2
    fv = fleet.view([a["id"] for a in ARMS], f, ["sonnet"])
    assert fv["baselines"]["eagle3-k1"]["nodes"] == ["n1", "n2"]
    assert len(fv["baselines"]["eagle3-k1"]["repeats"]["sonnet"]) == 6
    g = facts_of(classes_differ=True)
    g["eagle3-k1"]["repeats"]["sonnet"][2]["node"] = "n2"
    gv = fleet.view([a["id"] for a in ARMS], g, ["sonnet"])
    assert len(gv["facts"]["eagle3-k1"]["repeats"]["sonnet"]) == 2 and "sonnet r3 on n2" in gv["left_out"]["eagle3-k1"]


def test_the_baseline_spread_across_nodes_is_fiellers_interval_on_the_fastest_over_the_slowest():
    f = facts_of()
    sp = fleet.spread(f, ["sonnet"])["sonnet"]
    n1, n2 = [100.0, 104.0, 98.0], [80.0, 83.0, 79.0]
    assert (sp["fastest"], sp["slowest"]) == ("n1", "n2")
    assert sp["ratio"] == pytest.approx(sum(n1) / sum(n2), rel=1e-4)
    assert sp["nodes"]["n1"]["mean"] == pytest.approx(sum(n1) / 3)
    lo, hi = sp["ci95"]
    assert lo < sp["ratio"] < hi and sp["homogeneous"] is False  # 1.25x with tight repeats: the nodes differ
    # Fieller's bounds solve (x̄ − ρȳ)² = t² (v_x + ρ² v_y) at the Welch–Satterthwaite df (scipy's t quantile)
    import statistics
    mx, my = statistics.fmean(n1), statistics.fmean(n2)
    vx, vy = statistics.variance(n1) / 3, statistics.variance(n2) / 3
    rho = mx / my
    df = (vx + rho ** 2 * vy) ** 2 / (vx ** 2 / 2 + rho ** 4 * vy ** 2 / 2)
    t = sst.t.ppf(0.975, df)
    for bound in (lo, hi):
        assert (mx - bound * my) ** 2 == pytest.approx(t ** 2 * (vx + bound ** 2 * vy), rel=1e-2)


# -- children of a Ray actor ----------------------------------------------------------------------------------

def test_a_child_starts_with_no_signal_blocked_whatever_thread_started_it():
    """A Ray actor's event loop runs in a thread that blocks SIGINT, and a blocked mask survives exec: the
    supervisor's wrapper (tui.core.proc.pdeathsig) clears it, so a server stops gracefully on SIGINT there too."""
    import signal
    import subprocess
    import sys
    import threading
    import time

    got: dict[str, str] = {}

    def spawn() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        raw = subprocess.Popen(["sleep", "30"])
        wrapped = subprocess.Popen([sys.executable, "-m", "tui.core.proc.pdeathsig", "sleep", "30"])
        try:
            for name, p in (("raw", raw), ("wrapped", wrapped)):
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    status = Path(f"/proc/{p.pid}/status").read_text()
                    if "Name:\tsleep" in status:
                        got[name] = next(ln.split()[1] for ln in status.splitlines() if ln.startswith("SigBlk"))
                        break
                    time.sleep(0.05)
        finally:
            for p in (raw, wrapped):
                p.kill()
                p.wait()

    t = threading.Thread(target=spawn)
    t.start()
    t.join()
    assert int(got["raw"], 16) & (1 << (signal.SIGINT - 1))  # what the thread's mask would leave the child
    assert int(got["wrapped"], 16) == 0


def test_compare_shows_each_fleet_arm_beside_its_own_nodes_baseline():
    from tui.core.results.compare import columns_of

    f = facts_of()
    fv = fleet.view([a["id"] for a in ARMS], f, ["sonnet"])
    m = fleet.matrix([dict(a) for a in ARMS], fv, ["sonnet"], f)
    cols = {c["arm"]: c for c in columns_of({"profile": "p", "matrix": m}, "run")}
    assert cols["eagle3-k2"]["baseline_tok_s"] == pytest.approx((80 + 83 + 79) / 3, rel=1e-4)  # n2's
    assert cols["eagle3-k1"]["baseline_tok_s"] == pytest.approx((100 + 104 + 98) / 3, rel=1e-4)  # n1's
    assert cols["eagle3-k2"]["speedup"] == pytest.approx(301 / 242, rel=1e-3)
