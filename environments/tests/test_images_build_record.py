"""Build records (deepswe.env.images.build_record): what a manifest reads as an image's build
seconds, written safely when a training step's parallel rollouts finish one image at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from deepswe.env.images.build_record import build_seconds, record_build


def test_a_record_is_read_back_and_an_unknown_image_has_none(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSWE_CACHE", str(tmp_path))
    assert build_seconds("deepswe/task:never-built") is None
    record_build("deepswe/task:abc", 12.34)
    assert build_seconds("deepswe/task:abc") == 12.3


def test_threads_finishing_one_image_at_once_all_record_and_none_fails(tmp_path, monkeypatch):
    """Regression: the spine step on Ray failed with FileNotFoundError when two rollouts of one
    process built the same task image together and shared one temporary file name."""
    monkeypatch.setenv("DEEPSWE_CACHE", str(tmp_path))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: record_build("deepswe/task:same", float(i)), range(64)))
    assert build_seconds("deepswe/task:same") in {float(i) for i in range(64)}
    assert not list((tmp_path / "image-builds").glob("*.tmp"))
