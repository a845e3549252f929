"""Kept optimizer buffers: zeroed float32 vectors that ask the kernel for transparent huge pages."""

from __future__ import annotations

import gc
import mmap
import os
from pathlib import Path

import pytest
import torch

from distro_bench.train.optim.buffers import kept_zeros


def _vm_flags(address: int) -> list[str]:
    """The VmFlags of this process's mapping that holds `address` (/proc/self/smaps)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            start, end = (int(x, 16) for x in head.split("-"))
            inside = start <= address < end
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def test_kept_buffer_is_a_writable_zeroed_float32_vector():
    t = kept_zeros(3 * 1024 * 1024)
    gc.collect()  # the mapping lives as long as the tensor, not as a local name
    assert t.dtype == torch.float32 and t.shape == (3 * 1024 * 1024,) and t.is_contiguous()
    assert int(torch.count_nonzero(t)) == 0
    t.view(-1, 64).add_(1.0)
    assert float(t.sum()) == 3 * 1024 * 1024
    assert kept_zeros(0).shape == (0,)


@pytest.mark.skipif(not hasattr(mmap, "MADV_HUGEPAGE") or not Path("/proc/self/smaps").exists(),
                    reason="needs Linux: MADV_HUGEPAGE and /proc/self/smaps")
def test_kept_buffer_is_advised_for_huge_pages_and_torch_memory_is_not():
    """`hg` in VmFlags: the mapping carries MADV_HUGEPAGE (whether the kernel then finds free 2 MiB pages is
    the host's matter, so that is not asserted)."""
    kept, plain = kept_zeros(4 * 1024 * 1024), torch.zeros(4 * 1024 * 1024)
    assert "hg" in _vm_flags(kept.data_ptr())
    if not os.environ.get("THP_MEM_ALLOC_ENABLE"):  # torch's own switch advises its large tensors too
        assert "hg" not in _vm_flags(plain.data_ptr())
