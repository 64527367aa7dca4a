"""tarsd inside a memory budget: the limits it reads (cgroup v1 and v2, up the tree), the settings
it picks from them, and a real tarsd in a real 512 MB memory cgroup that indexes, embeds and
answers a 1,000-note vault without being killed. The 10,000-note runs at 512 MB and 1 GB are
bench/daemon_memory.py's (they take about half an hour each)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from harness.cgroup import CgroupUnavailable, MemoryCgroup
from harness.daemon import wait_for
from harness.vault_files import write
from tarsd.config.budget import LOW_MEMORY_MB, MB, Budget, cgroup_limits, memory_budget, plan_for, usable_cores
from tarsd.config.settings import load_config

NOTES = 1000
LIMIT_MB = 512


def fake_proc(root: Path, cgroup_lines: str, mountinfo: str) -> None:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(cgroup_lines)
    (root / "proc/self/mountinfo").write_text(mountinfo)


def limit_file(root: Path, folder: str, name: str, value: str) -> None:
    path = root / folder.lstrip("/") / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value + "\n")


def test_the_budget_is_the_least_limit_of_a_cgroup_v2_unit_and_its_parents(tmp_path: Path):
    """A systemd user unit on a Pi (cgroup v2 only): its MemoryHigh= is below its MemoryMax=, a parent
    slice is stricter still, and "max" means no limit."""
    unit = "/user.slice/user-1000.slice/user@1000.service/app.slice/tarsd.service"
    fake_proc(tmp_path, f"0::{unit}\n", "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
    limit_file(tmp_path, f"/sys/fs/cgroup{unit}", "memory.max", str(750 * MB))
    limit_file(tmp_path, f"/sys/fs/cgroup{unit}", "memory.high", str(600 * MB))
    limit_file(tmp_path, "/sys/fs/cgroup/user.slice/user-1000.slice", "memory.max", "max")
    assert memory_budget(root=tmp_path) == Budget(600 * MB, f"cgroup v2 memory.high of {unit}")

    limit_file(tmp_path, "/sys/fs/cgroup/user.slice", "memory.max", str(400 * MB))
    assert memory_budget(root=tmp_path) == Budget(400 * MB, "cgroup v2 memory.max of /user.slice")
    # [daemon] memory_mb wins over everything.
    assert memory_budget(300, root=tmp_path) == Budget(300 * MB, "[daemon] memory_mb")


def test_a_cgroup_v1_limit_and_a_container_s_own_view(tmp_path: Path):
    """cgroup v1 (this machine's kind): memory.limit_in_bytes, its "no limit" value ignored. In a
    container the mount shows the container's cgroup as its root."""
    fake_proc(
        tmp_path,
        "4:memory:/docker/abc\n1:cpu:/docker/abc\n",
        "33 31 0:30 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n",
    )
    limit_file(tmp_path, "/sys/fs/cgroup/memory", "memory.limit_in_bytes", str(1024 * MB))
    assert cgroup_limits(tmp_path) == [Budget(1024 * MB, "cgroup v1 memory.limit_in_bytes of /docker/abc")]
    limit_file(tmp_path, "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "9223372036854771712")
    assert cgroup_limits(tmp_path) == []
    assert memory_budget(root=tmp_path).source == "the machine's memory"


def test_the_settings_picked_from_the_budget(tmp_path: Path):
    empty = tmp_path / "config.toml"
    empty.touch()  # never the user's own config
    config = load_config(path=empty, env={}, vault_path=tmp_path)
    usual = plan_for(config, Budget(LOW_MEMORY_MB * MB, "test"))
    assert not usual.low and usual.sqlite_cache_mb == 64 and not usual.keyword_only
    assert usual.malloc_arenas == max(2, usable_cores()) and not usual.fixed_mmap_threshold  # one per core, not glibc's 8
    assert f"(malloc: {usual.malloc_arenas} arenas)" in usual.describe()
    pi3 = plan_for(config, Budget(552 * MB, "cgroup v2 memory.high of /tarsd.service"))  # MemoryHigh=60% of a Pi 3
    assert pi3.low and pi3.malloc_arenas == 2 and pi3.fixed_mmap_threshold and pi3.sqlite_cache_mb == 16 and pi3.chunk_workers == 1
    assert not pi3.keyword_only
    described = pi3.describe()
    assert described.startswith("552 MB (cgroup v2 memory.high of /tarsd.service): low-memory settings")
    assert "(malloc: fixed mmap threshold, 2 arenas" in described
    zero = plan_for(config, Budget(258 * MB, "cgroup v2 memory.high of /tarsd.service"))  # a Pi Zero 2 W's 60%
    assert "258 MB" in zero.keyword_only and "min_memory_mb = 0" in zero.keyword_only
    # Asked for explicitly: the model loads whatever the budget; and an Ollama embedder needs no local memory.
    forced = load_config(path=empty, env={"TARS_EMBEDDER_MIN_MEMORY_MB": "0"}, vault_path=tmp_path)
    assert not plan_for(forced, Budget(258 * MB, "test")).keyword_only
    ollama = load_config(path=empty, env={"TARS_EMBEDDER": "ollama"}, vault_path=tmp_path)
    assert not plan_for(ollama, Budget(258 * MB, "test")).keyword_only


@pytest.fixture
def memory_cgroup():
    made: list[MemoryCgroup] = []

    def make(limit_mb: int) -> MemoryCgroup:
        try:
            cgroup = MemoryCgroup.create("tars-test", limit_mb * MB)
        except CgroupUnavailable as exc:
            pytest.skip(f"no memory cgroup can be created here: {exc}")
        made.append(cgroup)
        return cgroup

    yield make
    for cgroup in made:
        cgroup.remove()


def small_vault(vault: Path) -> None:
    """NOTES short notes (a sentence each: embedding them takes seconds, not minutes; the memory
    that counts is the model's and tarsd's), and three with something to find."""
    rng = random.Random(25)
    who = ["the beekeeper", "a cyclist", "my neighbour", "the plumber", "our landlord", "a botanist", "the choir", "my sister"]
    did = ["repaired", "painted", "borrowed", "photographed", "measured", "sold", "cleaned", "planted"]
    what = ["the shed", "a canoe", "the hedge", "an old piano", "the greenhouse", "a kite", "the gate", "some tulips"]
    when = ["on Monday", "in March", "after the storm", "before lunch", "at dawn", "last winter", "on the weekend", "in the rain"]
    for n in range(NOTES - 3):
        sentence = f"{rng.choice(who).capitalize()} {rng.choice(did)} {rng.choice(what)} {rng.choice(when)}."
        write(vault, f"log/{n:04d}.md", f"# Log {n}\n\n{sentence}\n")
    write(vault, "Sourdough.md", "# Sourdough\n\nBake the loaf at 250 C for 20 minutes with steam, then 220 C.\n")
    write(vault, "Home automation.md", "# Home automation\n\nThe Zigbee dongle sits on the USB 2 port of the Raspberry Pi.\n")
    write(vault, "Quokka.md", "# Quokka\n\nA quokka sanctuary on Rottnest Island.\n")


# memory_cgroup first: it is torn down last, once the daemon has gone.
def test_tarsd_indexes_embeds_and_answers_inside_512_mb(memory_cgroup, start_daemon, vault: Path):
    small_vault(vault)
    cgroup = memory_cgroup(LIMIT_MB)
    daemon = start_daemon(embedder="local", cgroup=cgroup)
    status = wait_for(
        lambda: (s := daemon.status()).counts.get("files") == NOTES and s.counts.get("pending_vectors") == 0 and s,
        f"{NOTES} notes indexed and embedded inside {LIMIT_MB} MB",
        deadline=600,
    )
    # tarsd read the limit of the cgroup it runs in, and picked the low-memory settings with the model.
    assert status.memory_budget.startswith(f"{LIMIT_MB} MB (cgroup v"), status.memory_budget
    assert "low-memory settings" in status.memory_budget and "keyword search only" not in status.memory_budget
    assert status.embedder.state == "ready" and status.counts["vectors"] >= NOTES

    assert daemon.search("quokka", mode="fts")[0] == "Quokka.md"
    assert daemon.search("what temperature for baking bread", mode="vec")[0] == "Sourdough.md"
    assert daemon.search("zigbee usb dongle", mode="hybrid")[0] == "Home automation.md"
    assert cgroup.oom_kills() == 0 and daemon.process.poll() is None
    assert daemon.stop() == 0


def test_under_the_model_s_minimum_tarsd_answers_by_keyword_and_says_why(memory_cgroup, start_daemon, vault: Path):
    write(vault, "Quokka.md", "# Quokka\n\nA quokka sanctuary on Rottnest Island.\n")
    daemon = start_daemon(embedder="local", cgroup=memory_cgroup(256))
    status = daemon.status()
    assert status.memory_budget.startswith("256 MB (cgroup v") and "keyword search only" in status.memory_budget
    assert status.embedder.state == "disabled" and status.embedder.kind == "local"
    assert "min_memory_mb" in status.embedder.reason, status.embedder.reason
    assert daemon.search("quokka", mode="fts") == ["Quokka.md"]
    hybrid = daemon.tarsctl("search", "--mode", "hybrid", "quokka")
    assert hybrid.returncode == 0 and hybrid.stdout.startswith("Quokka.md"), hybrid.stdout + hybrid.stderr
    doctor = daemon.tarsctl("doctor", "--json")
    [model] = [check for check in json.loads(doctor.stdout)["checks"] if check["name"] == "model"]
    assert model["status"] == "warn" and model["summary"].startswith("the running tarsd does not load the model: keyword search only")
