"""benchmarks/distro_ab.py: DisTrO at a git revision loaded beside this tree's, and the paired ratio it prints."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess

import pytest

from tests.helpers import REPO


def _load():
    spec = importlib.util.spec_from_file_location("distro_ab", REPO / "benchmarks" / "distro_ab.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _is_checkout() -> bool:
    if shutil.which("git") is None:
        return False
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True)
    return done.returncode == 0


needs_git = pytest.mark.skipif(not _is_checkout(), reason="needs git and a git checkout of the repository")


@needs_git
@pytest.mark.slow
def test_a_revision_is_loaded_apart_and_steps_the_same_gradients():
    """HEAD loaded twice, as two modules of their own: stepped on the same gradients they end at the same
    parameters, which shows both versions see the same work."""
    ab = _load()
    one, two = ab.distro_class("HEAD"), ab.distro_class("HEAD")
    assert one is not two and one.__module__ != "distro_bench.train.optim.distro"
    r = ab.compare({"a": one, "b": two}, preset="tiny", repeats=3, world=2, batch=2, seq_len=16)
    assert r["same_parameters"] is True
    assert set(r["versions"]) == {"a", "b"} and all(v["ms"] > 0 for v in r["versions"].values())
    ratio, low, high = r["ratios"]["b"]
    assert low <= ratio <= high


@needs_git
def test_an_unknown_revision_is_named_in_the_error():
    with pytest.raises(SystemExit, match="no-such-revision"):
        _load().distro_class("no-such-revision")


def test_median_interval_widens_with_spread():
    mi = _load().median_interval
    assert mi([1.0] * 20) == (1.0, 1.0, 1.0)
    median, low, high = mi([float(i) for i in range(101)])
    assert median == 50.0 and 38.0 <= low < 50.0 < high <= 62.0


@pytest.mark.parametrize("argv", [["--repeats", "1"], ["--preset", "huge"]])
def test_bad_arguments_are_refused_before_any_work(argv, capsys):
    with pytest.raises(SystemExit) as err:
        _load().main(argv)
    assert err.value.code == 2 and argv[0] in capsys.readouterr().err
