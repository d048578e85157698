"""The artifact cache: built once, keyed by what the build depends on, checked on load, rebuilt when corrupt, safe
under concurrent runs."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from flowlab.core.artifacts import (
    BUILD_THREADS,
    Artifact,
    CorruptArtifactWarning,
    clear,
    ensure,
    entries,
    is_cached,
    sha256_tensor,
)
from flowlab.core.config import Config


@dataclass(frozen=True)
class Noise(Config):
    n: int = 8
    seed: int = 0
    log: str = ""  # a file each build appends a line to (counts the builds)


def build_noise(cfg: Noise, folder: Path) -> None:
    if cfg.log:
        with open(cfg.log, "a") as f:
            f.write("built\n")
    torch.save(torch.randn(cfg.n, generator=torch.Generator().manual_seed(cfg.seed)), folder / "x.pt")


def build_nothing(cfg: Noise, folder: Path) -> None:
    """A broken builder: writes no file."""


def build_and_fail(cfg: Noise, folder: Path) -> None:
    (folder / "half.pt").write_bytes(b"partial")
    raise RuntimeError("the build failed half way")


def _load(entry) -> torch.Tensor:
    return torch.load(entry.path / "x.pt", weights_only=True)


def test_an_artifact_is_built_once_and_then_reused(tmp_path):
    log = tmp_path / "log"
    art = Artifact("core.test_noise", build=build_noise, config=Noise(log=str(log)))
    assert not is_cached(art, root=tmp_path)
    first = ensure(art, root=tmp_path)
    second = ensure(art, root=tmp_path)
    assert first.built and not second.built and second.seconds == 0.0 and first.path == second.path
    assert log.read_text() == "built\n" and is_cached(art, root=tmp_path)
    assert torch.equal(_load(first), torch.randn(8, generator=torch.Generator().manual_seed(0)))
    manifest = json.loads((first.path / "manifest.json").read_text())
    assert manifest["seed"] == 0 and manifest["torch"] == torch.__version__ and set(manifest["files"]) == {"x.pt"}
    assert manifest["builder"].endswith("build_noise") and manifest["build_seconds"] >= 0


def test_the_key_covers_config_version_inputs_and_builder(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("1,2\n")
    base = Artifact("core.test_noise", build=build_noise, config=Noise(), inputs=(data,))
    keys = {
        base.key(),
        Artifact("core.test_noise", build=build_noise, config=Noise(n=9), inputs=(data,)).key(),
        Artifact("core.test_noise", build=build_noise, config=Noise(), inputs=(data,), version=2).key(),
        Artifact("core.test_noise", build=build_nothing, config=Noise(), inputs=(data,)).key(),
        Artifact("core.other", build=build_noise, config=Noise(), inputs=(data,)).key(),
    }
    assert len(keys) == 5
    data.write_text("1,3\n")  # the same file name with other contents
    assert base.key() not in keys
    with pytest.raises(FileNotFoundError, match=r"^inputs: artifact core.test_noise needs"):
        Artifact("core.test_noise", build=build_noise, config=Noise(), inputs=(tmp_path / "absent",)).key()


def build_threads(cfg: Noise, folder: Path) -> None:
    """Writes the intra-op thread count the build ran on, and a float sum whose rounding could depend on it."""
    x = torch.randn(1 << 16, generator=torch.Generator().manual_seed(cfg.seed))
    torch.save({"threads": torch.get_num_threads(), "sum": x.sum()}, folder / "x.pt")


def test_every_build_runs_on_one_thread_and_the_caller_keeps_its_own(tmp_path):
    """A build's bytes must not depend on the caller's thread count (the key does not carry the caller's)."""
    before = torch.get_num_threads()
    try:
        for n, root in ((2, tmp_path / "a"), (1, tmp_path / "b")):
            torch.set_num_threads(n)
            entry = ensure(Artifact("core.test_threads", build=build_threads, config=Noise()), root=root)
            assert torch.load(entry.path / "x.pt", weights_only=True)["threads"] == BUILD_THREADS == 1
            assert torch.get_num_threads() == n and entry.manifest["threads"] == 1
        a, b = (next((tmp_path / r).rglob("x.pt")).read_bytes() for r in ("a", "b"))
        assert a == b
    finally:
        torch.set_num_threads(before)


def test_an_artifact_that_declares_two_threads_builds_on_two_under_its_own_key(tmp_path):
    before = torch.get_num_threads()
    one, two = (Artifact("core.test_threads", build=build_threads, config=Noise(), threads=n) for n in (1, 2))
    assert one.key() != two.key()  # the thread count is part of the address: both entries live side by side
    try:
        torch.set_num_threads(1)
        entry = ensure(two, root=tmp_path)
        assert torch.load(entry.path / "x.pt", weights_only=True)["threads"] == 2 == entry.manifest["threads"]
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match=r"^threads: expected a positive int"):
            Artifact("core.test_threads", build=build_threads, config=Noise(), threads=bad)


def test_a_flipped_byte_is_rebuilt_with_a_warning_not_used(tmp_path):
    art = Artifact("core.test_noise", build=build_noise, config=Noise())
    entry = ensure(art, root=tmp_path)
    raw = bytearray((entry.path / "x.pt").read_bytes())
    raw[-9] ^= 0x01
    (entry.path / "x.pt").write_bytes(bytes(raw))
    with pytest.warns(CorruptArtifactWarning, match="does not match its checksum"):
        again = ensure(art, root=tmp_path)
    assert again.built and torch.equal(_load(again), torch.randn(8, generator=torch.Generator().manual_seed(0)))
    assert len(list(entry.path.parent.glob("*.corrupt-*"))) == 1  # kept aside for a look, never loaded
    (again.path / "x.pt").unlink()
    with pytest.warns(CorruptArtifactWarning, match="x.pt is missing"):
        assert ensure(art, root=tmp_path).built


def test_a_failed_build_leaves_no_entry(tmp_path):
    for builder, error in ((build_and_fail, RuntimeError), (build_nothing, ValueError)):
        art = Artifact("core.test_noise", build=builder, config=Noise())
        with pytest.raises(error):
            ensure(art, root=tmp_path)
        assert not is_cached(art, root=tmp_path)
        assert not [p for p in (tmp_path / "artifacts/core.test_noise").iterdir() if p.suffix != ".lock"]


_RACE = """
import sys, time
from dataclasses import dataclass
from pathlib import Path
import torch
from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.config import Config

@dataclass(frozen=True)
class Slow(Config):
    n: int = 1000

def build(cfg, folder):
    with open(sys.argv[2], "a") as f:
        f.write("built\\n")
    time.sleep(1.0)  # long enough for the other process to ask meanwhile
    torch.save(torch.arange(cfg.n), folder / "x.pt")

entry = ensure(Artifact("core.test_race", build=build, config=Slow()), root=Path(sys.argv[1]))
assert torch.equal(torch.load(entry.path / "x.pt", weights_only=True), torch.arange(1000))
print(entry.path)
"""


def test_concurrent_runs_build_once_and_leave_the_cache_intact(tmp_path):
    script, log = tmp_path / "race.py", tmp_path / "log"
    script.write_text(_RACE)
    procs = [
        subprocess.Popen([sys.executable, str(script), str(tmp_path / "cache"), str(log)], stdout=subprocess.PIPE)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0].decode().strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0] and outs[0] == outs[1]
    assert log.read_text() == "built\n"  # the second process waited for the first build and reused it
    assert [p.name for p in Path(outs[0]).parent.iterdir() if not p.name.endswith(".lock")] == [Path(outs[0]).name]


def test_entries_and_clear(tmp_path):
    ensure(Artifact("core.test_noise", build=build_noise, config=Noise()), root=tmp_path)
    ensure(Artifact("core.test_noise", build=build_noise, config=Noise(n=4)), root=tmp_path)
    ensure(Artifact("core.other", build=build_noise, config=Noise()), root=tmp_path)
    listed = entries(root=tmp_path)
    assert [e["name"] for e in listed] == ["core.other", "core.test_noise", "core.test_noise"]
    assert all(e["bytes"] > 0 and Path(e["path"]).is_dir() for e in listed)
    assert clear(root=tmp_path, name="core.other") == 1 and len(entries(root=tmp_path)) == 2
    assert clear(root=tmp_path) == 2 and entries(root=tmp_path) == []


def test_bad_declarations_name_the_argument():
    with pytest.raises(ValueError, match=r"^name:"):
        Artifact("Digits Denoiser", build=build_noise, config=Noise())
    with pytest.raises(ValueError, match=r"^build:"):
        Artifact("core.x", build="train", config=Noise())
    with pytest.raises(ValueError, match=r"^config:"):
        Artifact("core.x", build=build_noise, config={"n": 8})
    with pytest.raises(ValueError, match=r"^version:"):
        Artifact("core.x", build=build_noise, config=Noise(), version=0)


def test_tensor_checksum_sees_values_dtype_and_shape():
    x = torch.arange(6.0)
    digests = {sha256_tensor(x), sha256_tensor(x.double()), sha256_tensor(x.reshape(2, 3)), sha256_tensor(x + 1)}
    assert len(digests) == 4 and sha256_tensor(x.clone()) == sha256_tensor(x)
