"""Copy-on-write workspaces: restore is exact (tree hash), never touches the pristine tree, and caps disk use."""

from __future__ import annotations

import os

import pytest

from gymsmith.sandbox import CowWorkspace, SandboxError, open_sandbox, tree_hash


@pytest.fixture()
def pristine(tmp_path):
    root = tmp_path / "pristine"
    for i in range(50):
        (root / f"pkg{i % 5}").mkdir(parents=True, exist_ok=True)
        (root / f"pkg{i % 5}" / f"m{i}.py").write_text(f"X = {i}\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(root / "run.sh", 0o755)
    os.symlink("pkg0/m0.py", root / "link.py")
    return root


@pytest.mark.parametrize("mode", ["overlay", "copy"])
def test_restore_is_exact_after_any_change(pristine, mode):
    before = tree_hash(pristine)
    with CowWorkspace(mode=mode) as ws:
        path = ws.restore(pristine)
        assert tree_hash(path) == before
        (path / "pkg1" / "m1.py").write_text("changed\n")
        (path / "pkg2" / "m2.py").unlink()
        (path / "new.txt").write_text("new")
        os.chmod(path / "run.sh", 0o644)
        assert tree_hash(path) != before
        ws.restore(pristine)
        assert tree_hash(path) == before
    assert tree_hash(pristine) == before  # the pristine tree was never written


def test_auto_mode_uses_overlay_where_mounting_is_permitted():
    with CowWorkspace() as ws:
        assert ws.mode == ("overlay" if os.geteuid() == 0 else "copy")


def test_tree_hash_sees_content_links_and_executable_bit(tmp_path):
    (tmp_path / "a").write_text("1")
    h0 = tree_hash(tmp_path)
    os.chmod(tmp_path / "a", 0o755)
    h1 = tree_hash(tmp_path)
    os.symlink("a", tmp_path / "b")
    h2 = tree_hash(tmp_path)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"cache")
    assert len({h0, h1, h2}) == 3 and tree_hash(tmp_path) == h2


def test_overlay_disk_quota_and_restore_after_fill(pristine):
    with CowWorkspace(disk_mb=8) as ws:
        if ws.mode != "overlay":
            pytest.skip("the copy mode has no disk quota (documented)")
        path = ws.restore(pristine)
        with open_sandbox(path) as sb:
            r = sb.exec("dd if=/dev/zero of=fill bs=1M count=64 2>&1")
        assert "No space left on device" in r.stdout
        ws.restore(pristine)
        assert not (path / "fill").exists()


def test_missing_pristine_is_a_clear_error(tmp_path):
    with CowWorkspace() as ws, pytest.raises(SandboxError, match="not a directory"):
        ws.restore(tmp_path / "missing")


def test_bad_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="'overlay' or 'copy'"):
        CowWorkspace(mode="hardlink")
