"""Each backend's run options are declared with the backends (harness/distro_bench/backends/catalog.py), not in the
CLI (issue 36): the CLI's choices come from the catalog, and an option the chosen backend would ignore is refused
with the backends that take it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distro_bench.backends.catalog import CATALOG, NAMES, OPTION_FLAGS, refuse_unread_options
from distro_bench.errors import InputError
from distro_bench.run.overrides import RunSettings


def test_the_catalog_is_the_registry_and_every_option_it_names_is_a_run_option():
    from distro_bench.backends.registry import BACKENDS

    assert list(CATALOG) == list(BACKENDS) and ("auto", *BACKENDS) == NAMES
    fields = set(RunSettings.__dataclass_fields__)
    assert set(OPTION_FLAGS) <= fields
    assert all(set(e.options) <= set(OPTION_FLAGS) for e in CATALOG.values())


def test_reading_the_catalog_imports_no_backend():
    code = ("import sys, distro_bench.backends.catalog, distro_bench.cli.options\n"
            "print(sorted(m for m in sys.modules if m.startswith('distro_bench.backends.') and m != "
            "'distro_bench.backends.catalog'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("backend", "given", "words"), [
    ("local", {"image": "mine:1"}, ["--image: the local backend does not use it", "applies to docker"]),
    ("netns", {"image": "mine:1"}, ["--image: the netns backend does not use it", "applies to docker"]),
    ("local", {"link_engine": "tc", "measure_links": True},
     ["--link-engine: the local backend", "--measure-links: the local backend", "applies to netns, docker"]),
])
def test_an_option_the_backend_would_ignore_is_refused_with_who_takes_it(backend, given, words):
    with pytest.raises(InputError) as e:
        refuse_unread_options(backend, given)
    assert all(w in str(e.value) for w in words), str(e.value)


@pytest.mark.parametrize(("backend", "given"), [
    ("docker", {"image": "mine:1", "link_engine": "userspace"}),
    ("netns", {"link_engine": "tc", "allow_unemulated": True, "measure_links": False, "image": None}),
    ("auto", {"image": "mine:1", "link_engine": "tc"}),  # auto: the backend it picks reads what applies
    ("local", {"image": None, "link_engine": None}),
    ("local", {"measure_links": False, "allow_unemulated": True, "link_engine": "auto"}),  # turned off: asks nothing of it; local reads
    # allow_unemulated (its links are never emulated: a shaped scenario runs there only when allowed)
])
def test_options_the_backend_reads_or_not_given_pass(backend, given):
    refuse_unread_options(backend, given)


def test_the_cli_refuses_before_any_work(cli):
    r = cli("run", "scenarios/ci-smoke.yaml", "--backend", "local", "--image", "x:1")
    assert r.exit_code != 0 and "--image: the local backend does not use it" in r.output
    assert "Traceback" not in r.output
