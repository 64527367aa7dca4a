"""Offline start: a model hub whose name does not resolve, or whose port refuses, ends the
download attempt at once with what happened and where a copy of the model comes from (not
"still downloading" for the ~40 s fastembed spends retrying with sleeps). Real tarsd, real sockets."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from harness.daemon import wait_for
from harness.user_env import closed_port_url
from harness.vault_files import write

# Well under fastembed's own retries (3 attempts, 3 s and 9 s sleeps between them), with room for a loaded machine.
PROMPT_SECONDS = 10.0


@pytest.mark.parametrize(
    ("site", "said"),
    [("unresolvable", "the name tars-no-such-host.invalid does not resolve"), ("closed", "cannot be reached (Connection refused)")],
)
def test_an_unreachable_download_site_ends_the_attempt_at_once(start_daemon, vault: Path, tmp_path: Path, site: str, said: str):
    write(vault, "garden.md", "# Garden\n\nTomatoes want six hours of sun.\n")
    hub = "https://tars-no-such-host.invalid" if site == "unresolvable" else closed_port_url()
    daemon = start_daemon(embedder="local", TARS_MODEL_DIR="", HF_ENDPOINT=hub, XDG_CACHE_HOME=str(tmp_path / "cache"))
    asked = time.monotonic()  # tarsd answers on its socket: the load attempt has begun
    embedder = wait_for(lambda: (e := daemon.status().embedder).state == "unavailable" and e, "the failed download")
    assert time.monotonic() - asked < PROMPT_SECONDS, embedder.reason
    reason = embedder.reason
    assert reason.startswith("cannot download the embedding model sentence-transformers/all-MiniLM-L6-v2: ") and said in reason
    assert "set [embedder] model_dir (or TARS_MODEL_DIR) to a copy of the model folder" in reason
    assert "https://huggingface.co/Qdrant/all-MiniLM-L6-v2-onnx" in reason and str(tmp_path / "cache" / "tars" / "models") in reason
    assert ".;" not in reason
    # Keyword search serves meanwhile, and says why there are no vectors.
    assert daemon.search("tomatoes") == ["garden.md"]


def test_through_a_proxy_the_name_is_left_to_the_proxy(start_daemon, vault: Path, tmp_path: Path):
    """With HTTPS_PROXY set, this machine need not resolve the hub's name: the download goes on."""
    with socket.socket() as proxy:
        proxy.bind(("127.0.0.1", 0))
        proxy.listen(8)
        proxy.settimeout(60)
        daemon = start_daemon(
            embedder="local",
            TARS_MODEL_DIR="",
            HF_ENDPOINT="https://tars-no-such-host.invalid",
            HTTPS_PROXY=f"http://127.0.0.1:{proxy.getsockname()[1]}",
            NO_PROXY="",
            XDG_CACHE_HOME=str(tmp_path / "cache"),
        )
        connection, _ = proxy.accept()  # the download asks the proxy: never answered here
        with connection:
            connection.settimeout(60)
            assert connection.recv(200).startswith(b"CONNECT tars-no-such-host.invalid:443")
            embedder = daemon.status().embedder
            assert embedder.state == "loading" and "downloading" in embedder.reason
