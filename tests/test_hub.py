"""The loopback hub against the real huggingface_hub client and httpx (127.0.0.1 only)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub import errors as hf_errors

from tui.sim.sonnet import SONNET_SHA256, SONNET_SIZE, sonnet_bytes, sonnet_path
from tui.sim.hub import AUTHORIZED_TOKEN, Fault, commit_for, start_hub

REPO = Path(__file__).resolve().parents[1]
TARGET = "openai/gpt-oss-120b"
DRAFT = "RedHatAI/gpt-oss-120b-speculator.eagle3"


def _dl(hub, tmp_path, repo, filename="config.json", **kw):
    return hf_hub_download(repo, filename, endpoint=hub.url, cache_dir=str(tmp_path / "hf" / "hub"),
                           token=kw.pop("token", False), **kw)


# -- the dataset the mirror serves ------------------------------------------------------------------


def test_sonnet_is_vllms_file():
    """The mirror serves vLLM's benchmarks/sonnet.txt (the bundled copy), not generated text."""
    data = sonnet_bytes()
    assert hashlib.sha256(data).hexdigest() == SONNET_SHA256 == (
        "d58663195ba6780da5f029b920c7ac00cad1e435ee1df7e03bf9ec2470f8dea4")
    assert len(data) == SONNET_SIZE == sonnet_path().stat().st_size
    text = data.decode("ascii")
    assert text.startswith("FROM fairest creatures we desire increase,")
    assert text.endswith("This wish I have; then ten times happy me!") and not text.endswith("\n")
    assert len(text.splitlines(keepends=True)) == 518


# -- hub protocol with the real client ----------------------------------------------------------------


def test_hf_hub_download_and_model_info(hub, tmp_path):
    path = _dl(hub, tmp_path, TARGET)
    cfg = json.loads(Path(path).read_text())
    assert cfg["architectures"] == ["GptOssForCausalLM"] and cfg["model_type"] == "gpt_oss"
    assert (cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["num_local_experts"]) == (
        2880, 201088, 36, 128)
    assert cfg["quantization_config"]["quant_method"] == "mxfp4"
    assert commit_for(TARGET) in path  # stored under snapshots/<X-Repo-Commit>

    api = HfApi(endpoint=hub.url, token=False)
    info = api.model_info(TARGET, files_metadata=True)
    assert info.sha == commit_for(TARGET) and len(info.sha) == 40
    assert info.gated is False and info.private is False
    total = sum(s.lfs.size if s.lfs else s.size for s in info.siblings)
    assert 60e9 < total < 70e9
    assert any(s.rfilename.endswith(".safetensors") and s.lfs for s in info.siblings)
    assert api.model_info(TARGET, revision=info.sha).sha == info.sha
    plain = api.model_info(TARGET)
    assert plain.siblings and plain.siblings[0].size is None  # sizes only with files_metadata

    draft = json.loads(Path(_dl(hub, tmp_path, DRAFT)).read_text())
    assert draft["speculators_model_type"] == "eagle3"
    assert draft["speculators_config"]["verifier"]["name_or_path"] == TARGET
    assert draft["transformer_layer_config"]["hidden_size"] == 2880
    size = sum(s.lfs.size if s.lfs else s.size for s in api.model_info(DRAFT, files_metadata=True).siblings)
    assert 1.5e9 < size < 1.9e9


def test_bundled_profiles_models_are_served(hub, tmp_path):
    """The repos of the bundled profiles, as their model cards / vLLM's docs describe them."""
    api = HfApi(endpoint=hub.url, token=False)
    llama3 = json.loads(Path(_dl(hub, tmp_path, "meta-llama/Meta-Llama-3-8B-Instruct",
                                 token=AUTHORIZED_TOKEN)).read_text())
    assert (llama3["hidden_size"], llama3["vocab_size"], llama3["num_hidden_layers"]) == (4096, 128256, 32)
    assert api.model_info("meta-llama/Meta-Llama-3-8B-Instruct").gated == "manual"
    eagle1 = json.loads(Path(_dl(hub, tmp_path, "yuhuili/EAGLE-LLaMA3-Instruct-8B")).read_text())
    assert eagle1["architectures"] == ["LlamaForCausalLM"] and eagle1["num_hidden_layers"] == 1
    assert "speculators_config" not in eagle1  # the EAGLE-1 repo layout names no verifier
    names = [s.rfilename for s in api.model_info("yuhuili/EAGLE-LLaMA3-Instruct-8B").siblings]
    assert "pytorch_model.bin" in names
    for repo, verifier, hidden, vocab, dv in (
            ("stevenabreu7/gpt-oss-120b-speculator.eagle3", TARGET, 2880, 201088, 64000),
            ("RedHatAI/gpt-oss-20b-speculator.eagle3", "openai/gpt-oss-20b", 2880, 201088, 64000),
            ("RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "meta-llama/Llama-3.1-8B-Instruct", 4096, 128256,
             32000)):
        cfg = json.loads(Path(_dl(hub, tmp_path, repo)).read_text())
        assert cfg["speculators_model_type"] == "eagle3"
        assert cfg["speculators_config"]["verifier"]["name_or_path"] == verifier
        tl = cfg["transformer_layer_config"]
        assert (tl["hidden_size"], tl["vocab_size"], cfg["draft_vocab_size"]) == (hidden, vocab, dv)
    gpt20 = json.loads(Path(_dl(hub, tmp_path, "openai/gpt-oss-20b")).read_text())
    assert (gpt20["num_hidden_layers"], gpt20["num_local_experts"], gpt20["hidden_size"]) == (24, 32, 2880)


def test_listed_weights_are_not_served(hub):
    r = httpx.head(f"{hub.url}/{TARGET}/resolve/main/model-00000-of-00014.safetensors")
    assert r.status_code == 200 and int(r.headers["content-length"]) > 1e9
    assert r.headers["x-repo-commit"] == commit_for(TARGET)
    assert httpx.get(f"{hub.url}/{TARGET}/resolve/main/model-00000-of-00014.safetensors").status_code == 501


def test_not_found_errors(hub, tmp_path):
    api = HfApi(endpoint=hub.url, token=False)
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        api.model_info("nobody/no-such-model")
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        _dl(hub, tmp_path, "nobody/no-such-model")
    with pytest.raises(hf_errors.EntryNotFoundError):
        _dl(hub, tmp_path, "specdec-sim/no-config")
    with pytest.raises(hf_errors.RevisionNotFoundError):
        api.model_info(TARGET, revision="v9")
    with pytest.raises(hf_errors.RevisionNotFoundError):
        _dl(hub, tmp_path, TARGET, revision="v9")
    r = httpx.get(f"{hub.url}/api/models/nobody/no-such-model")
    assert r.status_code == 404 and r.headers["x-error-code"] == "RepoNotFound"


def test_gated_and_private(hub, tmp_path):
    gated = "meta-llama/Llama-3.1-8B-Instruct"
    api = HfApi(endpoint=hub.url, token=False)
    assert api.model_info(gated).gated == "manual"  # the listing is public, the files are not
    with pytest.raises(hf_errors.GatedRepoError):
        _dl(hub, tmp_path, gated)
    r = httpx.head(f"{hub.url}/{gated}/resolve/main/config.json")
    assert r.status_code == 403 and r.headers["x-error-code"] == "GatedRepo"
    assert json.loads(Path(_dl(hub, tmp_path, gated, token=AUTHORIZED_TOKEN)).read_text())["hidden_size"] == 4096

    private = "specdec-sim/private-speculator.eagle3"
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        api.model_info(private)
    assert HfApi(endpoint=hub.url, token=AUTHORIZED_TOKEN).model_info(private).private is True
    assert all(AUTHORIZED_TOKEN not in repr(r) for r in hub.requests)  # the log never holds a token


def test_slow_hub_times_out(tmp_path):
    with start_hub(delay=0.5) as slow:
        with pytest.raises(Exception) as ei:
            HfApi(endpoint=slow.url, token=False).model_info(TARGET, timeout=0.05)
        assert "Timeout" in type(ei.value).__name__


def test_agent_harnesses_answer_is_harmless(hub):
    assert httpx.get(f"{hub.url}/api/agent-harnesses").json() == {"standardEnvVars": [], "harnesses": {}}


# -- the dataset mirror --------------------------------------------------------------------------------


def test_dataset_mirror_ranges(hub):
    r = httpx.get(hub.dataset_url)
    assert r.status_code == 200 and r.content == sonnet_bytes()
    assert hashlib.sha256(r.content).hexdigest() == SONNET_SHA256  # the real sonnet, as downloaded
    assert r.headers["content-length"] == str(SONNET_SIZE) and r.headers["etag"]
    assert r.headers["accept-ranges"] == "bytes"
    r = httpx.get(hub.dataset_url, headers={"Range": "bytes=1000-"})
    assert r.status_code == 206 and r.content == sonnet_bytes()[1000:]
    assert r.headers["content-range"] == f"bytes 1000-{SONNET_SIZE - 1}/{SONNET_SIZE}"
    r = httpx.get(hub.dataset_url, headers={"Range": "bytes=10-19"})
    assert r.status_code == 206 and r.content == sonnet_bytes()[10:20]
    r = httpx.get(hub.dataset_url, headers={"Range": f"bytes={SONNET_SIZE}-"})
    assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{SONNET_SIZE}"
    assert httpx.head(hub.dataset_url).headers["content-length"] == str(SONNET_SIZE)


def test_faults(hub):
    hub.set_fault("/datasets/*", "drop=1")
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(hub.dataset_url)
    assert httpx.get(hub.dataset_url).content == sonnet_bytes()  # only the first response was dropped

    hub.set_fault("/datasets/*", "corrupt")
    body = httpx.get(hub.dataset_url).content
    assert len(body) == SONNET_SIZE and hashlib.sha256(body).hexdigest() != SONNET_SHA256

    hub.set_fault("/datasets/*", "no-range")
    assert httpx.get(hub.dataset_url, headers={"Range": "bytes=5-"}).status_code == 200

    hub.set_fault("/datasets/*", "404")
    assert httpx.get(hub.dataset_url).status_code == 404
    hub.set_fault(f"/{TARGET}/resolve/*", "gated")
    r = httpx.head(f"{hub.url}/{TARGET}/resolve/main/config.json")
    assert r.status_code == 403 and r.headers["x-error-code"] == "GatedRepo"

    hub.clear_faults()
    assert httpx.get(hub.dataset_url).status_code == 200
    with pytest.raises(ValueError):
        Fault.parse("explode")


def test_constructor_faults_apply_per_path():
    with start_hub(faults={"/api/*": "503"}) as h:
        assert httpx.get(f"{h.url}/api/models/{TARGET}").status_code == 503
        assert httpx.get(h.dataset_url).status_code == 200
        assert [(r.method, r.path, r.status) for r in h.requests] == [
            ("GET", f"/api/models/{TARGET}", 503), ("GET", "/datasets/sonnet.txt", 200)]


def test_cli_prints_url_and_serves_until_interrupted():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "tui.sim", "hub", "--port", "0"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{url}/api/models/{TARGET}").json()["sha"] == commit_for(TARGET)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
