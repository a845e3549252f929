"""Buffers an optimizer keeps between steps, in transparent huge pages where the host allows them.

DisTrO sweeps multi-MB buffers every step (its momentum, 14 MB at `small`, and the transforms' work
memory), through GEMM tiles and row reductions that jump between 4 KiB pages. In 2 MiB pages those sweeps
miss the TLB far less: at `small` DisTrO's step took 0.925 of its time with them (95% interval 0.911-0.938;
paired ratios of steps interleaved in one process, as benchmarks/distro_ab.py measures them).

torch's CPU allocator gives huge pages only under THP_MEM_ALLOC_ENABLE=1, for the whole process (every
tensor of 2 MiB or more, the model's activations too). So this asks for them for the optimizer's own
buffers only: a private anonymous mapping advised MADV_HUGEPAGE (used when the host's THP mode is
`madvise` or `always`; under `never` it is plain memory), seen as a tensor without a copy. Python's mmap
does this; no library wraps it for tensors. Anywhere else (CUDA, a platform without MADV_HUGEPAGE, a
mapping refused) the buffer is torch.zeros.
"""

from __future__ import annotations

import mmap

import torch


def kept_zeros(numel: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """A zeroed float32 vector of `numel` elements, in huge pages when on the CPU and the host allows it."""
    if torch.device(device).type != "cpu" or not hasattr(mmap, "MADV_HUGEPAGE") or numel == 0:
        return torch.zeros(numel, device=device)
    try:
        # MAP_PRIVATE: Python's default for anonymous maps is shared memory, which THP leaves to shmem's own
        # setting (usually never). A fresh anonymous mapping reads as zeros.
        buf = mmap.mmap(-1, numel * 4, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        buf.madvise(mmap.MADV_HUGEPAGE)
    except (OSError, ValueError):
        return torch.zeros(numel, device=device)
    return torch.frombuffer(buf, dtype=torch.float32, count=numel)  # the tensor keeps `buf` alive
