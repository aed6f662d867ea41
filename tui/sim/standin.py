"""`python -m tui.sim stand-in --profile FILE`: the simulator as a *platform*, not a branch of the engine.

The engine starts a profile's `[stand_in] command` like any child process and reads ONE JSON line from its
stdout:

    {"env": {VAR: value, ...}, "unset": [VAR, ...], "placeholders": {"sim_hub": URL}, "notice": "text"}

This command builds that platform and then stays up (serving the loopback hub) until SIGINT/SIGTERM or until
its stdin/parent goes away, removing what it laid out when it exits:

- the loopback Hugging Face hub and dataset mirror (tui.sim.hub.start_hub) -> HF_ENDPOINT, {sim_hub};
- a fake system root read through SPECDEC_SYSROOT: DMI product name trn2.48xlarge, /dev/neuron0..15 and the
  Neuron sysfs (core_count, info/architecture/instance_type);
- a bin directory (prepended to PATH) with a `neuron-ls` that prints `neuron-ls -j` JSON in the shape of the
  SDK the simulated vLLM belongs to, listing under each device the live processes that hold its cores: the
  simulated servers' claims in <sysroot>/var/run/neuron-cores (tui/sim/cores.py: each simulated engine claims
  the cores of its NEURON_VISIBLE_DEVICES, default 0..TP-1, and an overlapping second server fails with the
  runtime's busy-cores error); with [simulation] fault = "cores-busy" a separate holder process that looks
  like a `vllm serve` (`<python> <dir>/holder/vllm serve openai/gpt-oss-120b --tensor-parallel-size 16`)
  holds cores 0-15 (devices 0-3): killing it, as the remedy says, frees them and leaves the stand-in running;
  the stand-in stops it when it exits, and it exits by itself when the stand-in is gone;
- a site directory (prepended to PYTHONPATH) with stub distributions `vllm` (version = [simulation]
  vllm_version), `vllm_neuron` (version mapped from it as Neuron's SDK table does, with the
  `vllm.platform_plugins` entry point), `transformers` (AutoTokenizer backed by tui/sim/tokens.py) and, where
  the interpreter has none, a placeholder `pandas` (vLLM's [bench] extra, which the simulated bench never uses);
- a private HF_HOME whose hub cache holds sparse (zero-byte-on-disk) placeholders of the stand-in repos'
  weight blobs, so disk checks see them as already cached (nothing is ever downloaded: the simulated server
  needs no weights); HF tokens are unset;
- SPECDEC_SIM, the [simulation] table as JSON, which the simulated serve and bench read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..core.versions import DEMO_VLLM, at_least, release
from .cores import claim, claims_dir

DEVICES = 16
CORES_PER_DEVICE = 4  # logical, LNC=2
HBM_PER_DEVICE = 103079215104  # 96 GiB
INSTANCE_TYPE = "trn2.48xlarge"
INSTANCE_ID = "i-05d1c0ffee0000001"
HF_TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE",
                 "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")

# vLLM version -> (vllm-neuron version, Neuron SDK) after shared/reference neuron.md §1.2/§3.4 and its
# 2026-12 update. Other versions >= 0.21 get "<vllm>.1.0.0" (an SDK the table does not know).
PLUGIN_FOR_VLLM: dict[str, tuple[str, str]] = {
    "0.11.0": ("0.2.0", "2.26"),
    "0.21.0": ("0.21.0.1.0.0", "2.31"),
    "0.24.0": ("0.24.0.1.1.0", "2.32"),
    "0.29.0": ("0.29.0.1.2.0", "2.33"),
}


def plugin_for_vllm(vllm_version: str) -> tuple[str, str | None]:
    """(vllm-neuron version, SDK release or None) that pins this vLLM."""
    vt = release(vllm_version) or ()
    key = ".".join(str(x) for x in (vt + (0, 0, 0))[:3])
    if key in PLUGIN_FOR_VLLM:
        return PLUGIN_FOR_VLLM[key]
    if vt[:2] < (0, 21):
        return "0.2.0", None
    return f"{key}.1.0.0", None


# ---------------------------------------------------------------------------------------------
# the fake system root and neuron-ls
# ---------------------------------------------------------------------------------------------


TRN2_RAM_KIB = 2048 << 20  # 2 TiB


def build_sysroot(root: Path) -> None:
    dmi = root / "sys/devices/virtual/dmi/id"
    dmi.mkdir(parents=True, exist_ok=True)
    (dmi / "product_name").write_text(INSTANCE_TYPE + "\n")
    (dmi / "board_asset_tag").write_text(INSTANCE_ID + "\n")
    (root / "proc").mkdir(parents=True, exist_ok=True)  # a trn2.48xlarge's host memory (2 TiB), mostly free
    (root / "proc/meminfo").write_text(f"MemTotal:       {TRN2_RAM_KIB} kB\nMemFree:        {TRN2_RAM_KIB - (8 << 20)} kB\n"
                                       f"MemAvailable:   {TRN2_RAM_KIB - (8 << 20)} kB\n")
    (root / "dev").mkdir(parents=True, exist_ok=True)
    claims_dir(root).mkdir(parents=True, exist_ok=True)  # who holds which cores (tui/sim/cores.py)
    for i in range(DEVICES):
        (root / "dev" / f"neuron{i}").write_text("")
        sd = root / "sys/devices/virtual/neuron_device" / f"neuron{i}"
        (sd / "info/architecture").mkdir(parents=True, exist_ok=True)
        (sd / "core_count").write_text(f"{CORES_PER_DEVICE * 2}\n")
        (sd / "info/architecture/instance_type").write_text(INSTANCE_TYPE + "\n")
        (sd / "info/architecture/device_name").write_text("Trainium2\n")
        (sd / "info/architecture/arch_type").write_text("NCv3\n")


def _torus(i: int) -> list[int]:
    r, c = divmod(i, 4)
    return [((r + 3) % 4) * 4 + c, r * 4 + (c + 3) % 4, r * 4 + (c + 1) % 4, ((r + 1) % 4) * 4 + c]


def neuron_ls_devices(sdk: str | None, busy: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """`neuron-ls -j` of an idle trn2.48xlarge; SDK 2.32+ adds instance_type/instance_id and full PCI BDFs."""
    new_format = sdk is not None and at_least(sdk, (2, 32))
    out: list[dict[str, Any]] = []
    for i in range(DEVICES):
        bus = 0xCC + i
        d: dict[str, Any] = {"neuron_device": i, "bdf": f"0000:{bus:02x}:00.0" if new_format else f"{bus:02x}:00.0"}
        if new_format:
            d["instance_type"] = INSTANCE_TYPE
            d["instance_id"] = INSTANCE_ID
        d.update({
            "cpu_affinity": "48-95,144-191" if i < 8 else "0-47,96-143",
            "numa_node": "1" if i < 8 else "0",
            "connected_to": _torus(i),
            "nc_count": CORES_PER_DEVICE,
            "logical_neuroncore_config": 2,
            "memory_size": HBM_PER_DEVICE,
            "neuroncore_ids": list(range(i * CORES_PER_DEVICE, (i + 1) * CORES_PER_DEVICE)),
            "neuron_processes": [],
        })
        out.append(d)
    for proc in busy or []:
        for i in proc.get("devices", []):
            out[i]["neuron_processes"].append({k: v for k, v in proc.items() if k != "devices"})
    return out


NEURON_LS = '''#!{python}
"""neuron-ls of specdec-tui's stand-in trn2.48xlarge (prints recorded-format JSON, plus the live holders of
cores from the stand-in's claims directory)."""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _sim_cores
args = sys.argv[1:]
data = _sim_cores.merge_into_devices(json.load(open({data!r})), _sim_cores.live_claims({claims!r}))
if args and args[0] in ("-j", "--json-output"):
    sys.stdout.write(json.dumps(data, indent=1) + "\\n")
    sys.exit(0)
print("instance-type: {itype}")
print("instance-id: {iid}")
print("logical-neuroncore-config: 2")
for d in data:
    procs = ", ".join("%s %s" % (p["pid"], p["command"]) for p in d["neuron_processes"])
    print("| %d | %d | %d-%d | 96 GB | %s |" % (d["neuron_device"], d["nc_count"], d["neuroncore_ids"][0],
          d["neuroncore_ids"][-1], procs))
'''


def build_bin(bindir: Path, devices: list[dict[str, Any]], claims: Path | None = None) -> None:
    bindir.mkdir(parents=True, exist_ok=True)
    data = bindir / "neuron-ls.json"
    data.write_text(json.dumps(devices))
    shutil.copyfile(Path(__file__).with_name("cores.py"), bindir / "_sim_cores.py")
    exe = bindir / "neuron-ls"
    exe.write_text(NEURON_LS.replace("{python}", sys.executable).replace("{data!r}", repr(str(data)))
                   .replace("{claims!r}", repr(str(claims) if claims else str(bindir / "no-claims")))
                   .replace("{itype}", INSTANCE_TYPE).replace("{iid}", INSTANCE_ID))
    exe.chmod(0o755)


# ---------------------------------------------------------------------------------------------
# stub packages
# ---------------------------------------------------------------------------------------------


def _dist_info(site: Path, dist: str, version: str, summary: str, entry_points: str = "") -> None:
    d = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nSummary: {summary}\n"
                                "Requires-Python: >=3.10\n")
    (d / "INSTALLER").write_text("specdec-tui stand-in\n")
    (d / "RECORD").write_text("")
    if entry_points:
        (d / "entry_points.txt").write_text(entry_points)


VLLM_INIT = '''"""Stub `vllm` of specdec-tui's stand-in platform: metadata only (the simulator serves and benchmarks)."""
__version__ = {version!r}
'''

VLLM_NEURON_INIT = '''"""Stub `vllm_neuron` of specdec-tui's stand-in platform."""
__version__ = {version!r}


def register():
    return "vllm_neuron.vllm.platform.NeuronPlatform"
'''

TRANSFORMERS_INIT = '''"""Stub `transformers` of specdec-tui's stand-in platform: AutoTokenizer only, backed by the simulator's
approximate tokenizer (one token per word / digit run / punctuation mark; whitespace joins the next token)."""
from ._sim_tokens import tokenize as _pieces_raw

__version__ = "4.57.0"

CHAT_TEMPLATE = ("{% for m in messages %}<|start|>{{ m['role'] }}<|message|>{{ m['content'] }}<|end|>{% endfor %}"
                 "{% if add_generation_prompt %}<|start|>assistant{% endif %}")


def _pieces(text):
    out, pending = [], ""
    for t in _pieces_raw(text):
        if t.isspace():
            pending += t
            continue
        out.append(pending + t)
        pending = ""
    if pending:
        out.append(pending)
    return out


class BatchEncoding(dict):
    def __getattr__(self, item):
        try:
            return self[item]
        except KeyError:
            raise AttributeError(item) from None


class SimTokenizer:
    is_fast = True
    bos_token = None
    eos_token = "<|end|>"
    pad_token = None

    def __init__(self, name_or_path):
        self.name_or_path = name_or_path
        self.chat_template = CHAT_TEMPLATE
        self._ids = {}
        self._pieces = []

    def _id(self, piece):
        i = self._ids.get(piece)
        if i is None:
            i = self._ids[piece] = len(self._pieces)
            self._pieces.append(piece)
        return i

    @property
    def vocab_size(self):
        return 201088

    def __len__(self):
        return self.vocab_size

    def encode(self, text, add_special_tokens=True, **kw):
        return [self._id(p) for p in _pieces(text)]

    def __call__(self, text, add_special_tokens=True, **kw):
        if isinstance(text, (list, tuple)):
            ids = [self.encode(t) for t in text]
            return BatchEncoding(input_ids=ids, attention_mask=[[1] * len(x) for x in ids])
        ids = self.encode(text)
        return BatchEncoding(input_ids=ids, attention_mask=[1] * len(ids))

    def decode(self, ids, skip_special_tokens=False, **kw):
        if isinstance(ids, int):
            ids = [ids]
        return "".join(self._pieces[i] if 0 <= i < len(self._pieces) else "" for i in ids)

    def convert_ids_to_tokens(self, ids):
        return [self.decode([i]) for i in ids]

    def apply_chat_template(self, conversation, add_generation_prompt=False, tokenize=True, **kw):
        text = "".join("<|start|>%s<|message|>%s<|end|>" % (m.get("role", "user"), m.get("content", ""))
                       for m in conversation)
        if add_generation_prompt:
            text += "<|start|>assistant"
        return self.encode(text) if tokenize else text


class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        return SimTokenizer(str(pretrained_model_name_or_path))


PreTrainedTokenizerBase = SimTokenizer
'''


PANDAS_INIT = '''"""Placeholder `pandas` of specdec-tui's stand-in platform (vLLM's [bench] extra, which the simulated
bench does not need). Present only where the interpreter has no pandas of its own."""
__version__ = "2.2.3"


def __getattr__(name):
    raise AttributeError("pandas." + name + " is not available: this pandas is the stand-in platform's placeholder")
'''


def build_site(site: Path, vllm_version: str, plugin_version: str) -> None:
    site.mkdir(parents=True, exist_ok=True)
    _dist_info(site, "vllm", vllm_version, "stand-in vLLM (specdec-tui simulator)",
               "[console_scripts]\nvllm = vllm.entrypoints.cli.main:main\n")
    (site / "vllm").mkdir(exist_ok=True)
    (site / "vllm" / "__init__.py").write_text(VLLM_INIT.format(version=vllm_version))
    _dist_info(site, "vllm-neuron", plugin_version, "stand-in vLLM Neuron plugin (specdec-tui simulator)",
               "[vllm.platform_plugins]\nneuron = vllm_neuron:register\n")
    (site / "vllm_neuron").mkdir(exist_ok=True)
    (site / "vllm_neuron" / "__init__.py").write_text(VLLM_NEURON_INIT.format(version=plugin_version))
    _dist_info(site, "transformers", "4.57.0", "stand-in transformers: AutoTokenizer (specdec-tui simulator)")
    tdir = site / "transformers"
    tdir.mkdir(exist_ok=True)
    (tdir / "__init__.py").write_text(TRANSFORMERS_INIT)
    # A copy, so the stub imports in any interpreter (tui itself need not be importable there).
    shutil.copyfile(Path(__file__).with_name("tokens.py"), tdir / "_sim_tokens.py")
    import importlib.util

    if importlib.util.find_spec("pandas") is None:  # never shadow a real pandas
        _dist_info(site, "pandas", "2.2.3", "stand-in placeholder for vLLM's [bench] extra (specdec-tui simulator)")
        (site / "pandas").mkdir(exist_ok=True)
        (site / "pandas" / "__init__.py").write_text(PANDAS_INIT)


# ---------------------------------------------------------------------------------------------
# the stand-in HF cache
# ---------------------------------------------------------------------------------------------


def prewarm_hf_cache(hub_cache: Path, repos: dict[str, Any]) -> None:
    """Sparse placeholders of every weight file of the stand-in repos (blobs + snapshot links), so the disk
    checks see them as cached. config.json and other small files are left for the real download."""
    for repo_id, repo in repos.items():
        rdir = hub_cache / ("models--" + repo_id.replace("/", "--"))
        snap = rdir / "snapshots" / repo.sha
        for name in sorted(repo.listed):  # listed-only files are the (LFS) weights
            if "/" in name:
                continue
            etag = repo.etag(name).strip('"')
            blob = rdir / "blobs" / etag
            blob.parent.mkdir(parents=True, exist_ok=True)
            if not blob.exists():
                with open(blob, "wb") as f:
                    f.truncate(repo.size(name))  # sparse: no space used
            snap.mkdir(parents=True, exist_ok=True)
            link = snap / name
            if not link.exists():
                try:
                    link.symlink_to(os.path.relpath(blob, snap))
                except OSError:
                    shutil.copyfile(blob, link)


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------


def _load_simulation(path: str) -> dict[str, Any]:
    from tui.core.profile.model import ProfileError, load_profile

    try:
        prof = load_profile(path)
    except ProfileError as exc:
        raise SystemExit(f"stand-in: {exc}") from None
    sim = prof.data.get("simulation")
    if sim is None:
        raise SystemExit(f"stand-in: profile {path} has no [simulation] table; the simulator stand-in needs one.")
    return dict(sim)


HOLDER_SCRIPT = '''"""Another process holding NeuronCores on specdec-tui's stand-in trn2.48xlarge (fault cores-busy): it looks
like a `vllm serve` to ps and neuron-ls, serves nothing, and exits on SIGTERM/SIGINT or when its parent (the
stand-in) is gone."""
import os
import signal
import sys
import time

parent = os.getppid()
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
signal.signal(signal.SIGINT, lambda *a: sys.exit(0))
while os.getppid() == parent:
    time.sleep(0.25)
'''
HOLDER_ARGS = ("serve", "openai/gpt-oss-120b", "--tensor-parallel-size", "16")
HOLDER_CORES = range(0, 4 * CORES_PER_DEVICE)  # devices 0-3


def start_holder(base: Path) -> "subprocess.Popen[bytes]":
    """Start the cores-busy fault's holder: a separate process whose command line reads like a `vllm serve`
    (`<python> <base>/holder/vllm serve …`). The caller claims the cores for its pid (build) and stops it."""
    d = base / "holder"
    d.mkdir(parents=True, exist_ok=True)
    script = d / "vllm"
    script.write_text(HOLDER_SCRIPT)
    return subprocess.Popen([sys.executable, str(script), *HOLDER_ARGS], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)


def stop_holder(proc: "subprocess.Popen[bytes] | None") -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def _cmdline(pid: int, wait_for: str = " ".join(HOLDER_ARGS), timeout: float = 10.0) -> str:
    """The holder's command line as /proc shows it. Right after Popen the child may still be between fork and
    exec (its cmdline empty or the parent's): wait, briefly, until it reads like the holder."""
    deadline = time.monotonic() + timeout
    text = ""
    while True:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return text
        text = " ".join(x.decode(errors="replace") for x in raw.split(b"\0") if x)
        if wait_for in text or time.monotonic() > deadline:
            return text
        time.sleep(0.02)


def build(base: Path, sim: dict[str, Any], environ: dict[str, str], hub_url: str | None,
          holder_pid: int | None = None) -> dict[str, Any]:
    """Lay the platform out under `base`; return the JSON message (env, unset, placeholders, notice).
    holder_pid: the cores-busy fault's holder (start_holder); None: the caller itself holds the cores."""
    vllm_version = str(sim.get("vllm_version", DEMO_VLLM))
    plugin, sdk = plugin_for_vllm(vllm_version)
    root, bindir, site, hf_home = base / "root", base / "bin", base / "site", base / "hf-home"
    build_sysroot(root)
    if sim.get("fault") == "cores-busy":  # another process holds devices 0-3 (cores 0-15) while we run
        pid = holder_pid or os.getpid()
        claim(claims_dir(root), HOLDER_CORES, pid=pid,
              command=_cmdline(pid) if holder_pid else "vllm " + " ".join(HOLDER_ARGS))
    build_bin(bindir, neuron_ls_devices(sdk), claims_dir(root))
    build_site(site, vllm_version, plugin)
    env: dict[str, str] = {
        "SPECDEC_SYSROOT": str(root),
        "PATH": os.pathsep.join([str(bindir)] + [p for p in environ.get("PATH", os.defpath).split(os.pathsep) if p]),
        "PYTHONPATH": os.pathsep.join([str(site)] + [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        "SPECDEC_SIM": json.dumps(sim),
        "HF_HOME": str(hf_home),
    }
    placeholders: dict[str, str] = {}
    notice = (f"stand-in platform: simulated {INSTANCE_TYPE} (vLLM {vllm_version}, vllm-neuron {plugin}"
              + (f", Neuron SDK {sdk}" if sdk else "") + ")")
    if hub_url:
        from .hub import default_repos

        prewarm_hf_cache(hf_home / "hub", default_repos())
        env["HF_ENDPOINT"] = hub_url
        placeholders["sim_hub"] = hub_url
        notice += f"; loopback hub and dataset mirror at {hub_url}"
    return {"env": env, "unset": list(HF_TOKEN_VARS), "placeholders": placeholders, "notice": notice}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.sim stand-in",
                                     description="Stand in for a trn2.48xlarge with vLLM Neuron and the Hugging Face "
                                                 "hub; prints one JSON line of environment, then serves until stopped.")
    parser.add_argument("--profile", required=True, help="the run's profile.toml (its [simulation] table)")
    parser.add_argument("--dir", default="", help="lay the platform out here (default: a temporary directory)")
    args = parser.parse_args(argv)
    sim = _load_simulation(args.profile)
    own = not args.dir
    base = Path(tempfile.mkdtemp(prefix="specdec-standin-")) if own else Path(args.dir)
    handle = None
    holder = None
    try:
        if sim.get("hub", True):
            from .hub import start_hub

            handle = start_hub(host="127.0.0.1", port=0)
        if sim.get("fault") == "cores-busy":
            holder = start_holder(base)
        msg = build(base, sim, dict(os.environ), handle.url if handle else None,
                    holder_pid=holder.pid if holder else None)
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()
        stop = threading.Event()

        def _term(signum: int, frame: Any) -> None:
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, _term)
        parent = os.getppid()
        while not stop.wait(0.5):
            if os.getppid() != parent:  # orphaned: the engine is gone
                break
    finally:
        stop_holder(holder)
        if handle is not None:
            handle.stop()
        if own:
            shutil.rmtree(base, ignore_errors=True)
    return 0


__all__ = ["build", "main", "neuron_ls_devices", "plugin_for_vllm", "start_holder", "stop_holder"]
