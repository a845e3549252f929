"""DisTrO against DeMo written from its equations (benchmarks/distro_reference.py), several workers in one
process (threads meeting at a barrier stand in for the process group), and DisTrO's own variants.

Tolerance: DisTrO keeps its momentum in the DCT domain and transforms whole groups of chunks with GEMMs,
the reference transforms each tensor in the parameter domain; the two sums round differently (float32,
about 1e-7 relative). Each step moves a parameter by exactly +-lr or 0, so parameters agree to 1e-6 except
where an update lies within rounding of 0 or two coefficients within rounding of a top-k tie; such
elements are allowed to be at most 0.1% of all.

The comparison's core (`train_distro`, `train_demo`, `differing`, `payload_bytes`) takes a device:
benchmarks/gpu_acceptance.py runs it on CUDA with the same tolerance, where cuBLAS's GEMMs round differently
again (another blocking and summation order), so a CUDA run is compared by the same rule, never bit for bit.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from distro_bench.train.optim.base import PhaseTimer
from distro_bench.train.optim.distro import DisTrO, DisTrOConfig
from tests.pair_workers import run_workers

REPO = Path(__file__).resolve().parents[3]
WORLD = 3
STEPS = 5
# Shapes on which DeMo's divisor rule and DisTrO's chunking agree (a divisor >= chunk / 2 exists or the
# dimension fits one chunk): 48 -> 16, 40 -> 10, 12 -> one chunk, 64 -> 16; vectors and matrices.
SHAPES = [(48, 40), (64,), (12, 64), (16, 16), (40,)]
OPTIONS = {"lr": 0.01, "chunk": 16, "topk": 3, "decay": 0.95, "weight_decay": 0.1}
# The tolerance above: an element differs when farther than ATOL apart; at most MAX_DIFFER of them may.
ATOL = 1e-6
MAX_DIFFER = 1e-3


def _reference():
    spec = importlib.util.spec_from_file_location("distro_reference", REPO / "benchmarks" / "distro_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run_workers(world: int, make, steps: int = STEPS, grad=None, device: torch.device | str = "cpu") -> list:
    return run_workers(world, make, steps, grad, device)


def _initial(shapes=SHAPES, device: torch.device | str = "cpu") -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(0)
    return [torch.nn.Parameter((torch.randn(s, generator=g) * 0.1).to(device)) for s in shapes]


def _distro(options: dict, shapes=SHAPES, steps: int = STEPS, device: torch.device | str = "cpu", comms=None):
    def make(rank, comm):
        if comms is not None:
            comms[rank] = comm
        params = _initial(shapes, device)
        s = DisTrO(DisTrOConfig(**options), [(f"p{i}", p) for i, p in enumerate(params)], comm, steps)
        return params, lambda step: s.step(step, PhaseTimer(torch.device(device)))
    return make


def _demo(ref_mod, shapes=SHAPES, device: torch.device | str = "cpu", refs=None, **options):
    """The reference on every rank (`options` as ReferenceDeMo's keywords); each rank's ReferenceDeMo in `refs`."""
    def make(rank, comm):
        params = _initial(shapes, device)
        r = ref_mod.ReferenceDeMo(params, comm, **options)
        if refs is not None:
            refs[rank] = r
        return params, lambda step: r.step()
    return make


def train_distro(options: dict, device: torch.device | str = "cpu", shapes=SHAPES, steps: int = STEPS,
                 world: int = WORLD) -> list[list[torch.Tensor]]:
    """Every rank's parameters after `steps` steps of our DisTrO with `options` on `device`."""
    return _run_workers(world, _distro(options, shapes, steps, device), steps=steps, device=device)


def train_demo(options: dict, device: torch.device | str = "cpu", shapes=SHAPES, steps: int = STEPS,
               world: int = WORLD) -> list[list[torch.Tensor]]:
    """The same for the DeMo reference; `options` as DisTrO's (lr, chunk, topk, decay, weight_decay, values)."""
    keys = ("lr", "topk", "chunk", "decay", "values", "weight_decay")
    ref = _demo(_reference(), shapes, device, **{k: options[k] for k in keys if k in options})
    return _run_workers(world, ref, steps=steps, device=device)


def differing(a: list[torch.Tensor], b: list[torch.Tensor]) -> tuple[float, float]:
    """(the largest share, over tensors, of elements farther than ATOL apart; the largest difference), on the CPU."""
    shares, worst = [0.0], 0.0
    for x, y in zip(a, b):
        d = (x.detach().cpu() - y.detach().cpu()).abs()
        shares.append((d > ATOL).float().mean().item())
        worst = max(worst, d.max().item())
    return max(shares), worst


def identical(ranks: list[list[torch.Tensor]]) -> bool:
    """Every rank holds rank 0's parameters, bit for bit."""
    return all(torch.equal(a, b) for r in ranks[1:] for a, b in zip(ranks[0], r))


@dataclass(frozen=True)
class Payload:
    """Bytes one worker hands to all-gathers in one step: predicted from the shapes, and counted."""

    predicted: float
    counted: int
    reference: int | None  # DeMo's own count (its wire format only)


def payload_bytes(options: dict, device: torch.device | str = "cpu", shapes=SHAPES, world: int = WORLD) -> Payload:
    """One step of our DisTrO with `options` on `device` (exchange ring: ThreadComm counts a ring's tx); with
    DeMo's wire format (fp32 values, int64 indices) the reference's own count beside it."""
    options = {**options, "exchange": "ring"}
    cfg = DisTrOConfig(**options)
    named = {f"p{i}": s for i, s in enumerate(shapes)}
    tx, _ = DisTrO.predict_payload_bytes(cfg, named, world)
    comms: dict = {}
    _run_workers(world, _distro(options, shapes, 1, device, comms), steps=1, device=device)
    reference = None
    if cfg.values == "fp32" and cfg.index == "int64":
        refs: dict = {}
        ref = _demo(_reference(), shapes, device, refs, lr=cfg.lr, topk=cfg.topk, chunk=cfg.chunk, decay=cfg.decay)
        _run_workers(world, ref, steps=1, device=device)
        reference = refs[0].bytes_sent
    return Payload(tx, comms[0].sent, reference)


@pytest.mark.parametrize("values", ["fp32", "1bit"])
def test_distro_matches_demo_written_from_its_equations(values):
    ref = train_demo({**OPTIONS, "values": values})
    ours = train_distro({**OPTIONS, "values": values, "weight_decay_on": "all"})
    start = _initial()
    for a, b, p0 in zip(ours[0], ref[0], start):
        assert not torch.equal(a, p0)
        differ, _ = differing([a], [b])
        assert differ <= MAX_DIFFER, (tuple(a.shape), differ)
    for rank in range(1, WORLD):  # replicas agree
        assert all(torch.equal(a, b) for a, b in zip(ours[0], ours[rank]))
    assert identical(ours)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible to torch")
@pytest.mark.parametrize("values", ["fp32", "1bit"])
def test_distro_matches_demo_on_cuda_and_cpu(values):
    """The same comparison on CUDA (ours against the reference, both there), and ours on CUDA against ours on
    the CPU: cuBLAS rounds differently from the CPU's GEMMs, so by the same tolerance, never bit for bit."""
    opts = {**OPTIONS, "values": values, "weight_decay_on": "all"}
    ours = train_distro(opts, "cuda")
    assert ours[0][0].is_cuda
    assert differing(ours[0], train_demo(opts, "cuda")[0])[0] <= MAX_DIFFER
    assert differing(ours[0], train_distro(opts, "cpu")[0])[0] <= MAX_DIFFER
    assert identical(ours)
    for fmt in ({**OPTIONS, "values": "fp32", "index": "int64", "bucket": False}, {**OPTIONS, "values": "1bit"}):
        paid = payload_bytes(fmt, "cuda")
        assert paid.counted == paid.predicted, fmt


def test_weight_decay_of_vectors_is_what_sets_demo_apart():
    """DisTrO's default decays matrices only; DeMo decays every tensor: the reference must see it."""
    ref_mod = _reference()

    def reference(rank, comm):
        params = _initial()
        r = ref_mod.ReferenceDeMo(params, comm, lr=0.01, topk=3, chunk=16, decay=0.95, weight_decay=0.1)
        return params, lambda step: r.step()

    ref = _run_workers(WORLD, reference)
    ours = _run_workers(WORLD, _distro({**OPTIONS, "values": "fp32"}))  # weight_decay_on: matrices
    vec = SHAPES.index((64,))
    assert ((ours[0][vec] - ref[0][vec]).abs() > 1e-6).float().mean() > 0.5


def test_chunking_differs_from_demo_where_no_good_divisor_exists():
    """A prime dimension: DeMo's divisor rule gives chunks of 1 row, DisTrO pads to 2 chunks of 16 (documented
    in harness/distro_bench/train/optim/dct.py); the reference catches the difference."""
    ref_mod = _reference()
    assert ref_mod.demo_chunk(31, 16) == 1
    shapes = [(31, 16)]

    def reference(rank, comm):
        params = _initial(shapes)
        r = ref_mod.ReferenceDeMo(params, comm, lr=0.01, topk=3, chunk=16, decay=0.95)
        return params, lambda step: r.step()

    ref = _run_workers(WORLD, reference)
    ours = _run_workers(WORLD, _distro({**OPTIONS, "values": "fp32"}, shapes))
    assert ((ours[0][0] - ref[0][0]).abs() > 1e-6).float().mean() > 0.1


def test_demo_wire_format_bytes_are_12_per_coefficient():
    """index int64 + values fp32: 8 + 4 bytes per kept coefficient, as DeMo's reference counts them."""
    ref_mod = _reference()
    refs = []

    def reference(rank, comm):
        params = _initial()
        r = ref_mod.ReferenceDeMo(params, comm, lr=0.01, topk=3, chunk=16, decay=0.95)
        refs.append(r)
        return params, lambda step: r.step()

    _run_workers(WORLD, reference, steps=1)
    shapes = {f"p{i}": s for i, s in enumerate(SHAPES)}
    cfg = DisTrOConfig(**{**OPTIONS, "values": "fp32", "index": "int64", "exchange": "ring"})  # DeMo's all_gather
    tx, rx = DisTrO.predict_payload_bytes(cfg, shapes, WORLD)
    assert tx == refs[0].bytes_sent
    assert rx == (WORLD - 1) * tx
    chunks = 0
    for shape in SHAPES:
        rows, cols = (1, shape[0]) if len(shape) == 1 else shape
        chunks += (rows // ref_mod.demo_chunk(rows, 16)) * (cols // ref_mod.demo_chunk(cols, 16))
    assert tx == 12 * 3 * chunks


@pytest.mark.parametrize("fmt", [
    {"values": "fp32", "index": "int64", "bucket": False},  # DeMo's wire format: two gathers per tensor
    {"values": "1bit", "bucket": True},  # production DisTrO: one packed buffer, u8 indices of 16x16 chunks
    {"values": "bf16"},
])
def test_payload_predicted_from_shapes_equals_what_the_gathers_were_handed(fmt):
    paid = payload_bytes({**OPTIONS, **fmt})
    assert paid.counted > 0
    assert paid.counted == paid.predicted
    if fmt.get("index") == "int64":
        assert paid.reference == paid.counted  # and DeMo counts its own format alike
    else:
        assert paid.reference is None


def test_demo_reference_format_equals_fp32_distro_after_20_steps():
    """The DeMo wire format changes only how indices travel: same parameters as `values: fp32` after 20 steps."""
    opts = {**OPTIONS, "values": "fp32"}
    a = _run_workers(WORLD, _distro(opts, steps=20), steps=20)
    b = _run_workers(WORLD, _distro({**opts, "index": "int64"}, steps=20), steps=20)
    assert all(torch.equal(x, y) for x, y in zip(a[0], b[0]))


@pytest.mark.parametrize("bucket", [True, False])
def test_overlap_applies_each_aggregate_one_step_later_and_drains(bucket):
    """Gradients here do not depend on parameters, so the overlapped run applies the same aggregates in the
    same order, one step late; after the last step (which drains) the parameters are bit-identical."""
    opts = {**OPTIONS, "values": "1bit", "bucket": bucket}
    plain = _run_workers(WORLD, _distro(opts))
    over = _run_workers(WORLD, _distro({**opts, "overlap": True}))
    assert all(torch.equal(x, y) for x, y in zip(plain[0], over[0]))
    # Before a drain, the overlapped run is exactly one aggregate behind: run it with more steps to go.
    behind = _run_workers(WORLD, _distro({**opts, "overlap": True}, steps=100))
    short = _run_workers(WORLD, _distro(opts), steps=STEPS - 1)
    assert all(torch.equal(x, y) for x, y in zip(short[0], behind[0]))
    assert not all(torch.equal(x, y) for x, y in zip(plain[0], behind[0]))


def _pull(rank: int, p: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The gradient of |p - target|^2 with a target per rank, plus noise: it depends on where p is."""
    target = torch.full_like(p, 0.2 * (rank + 1))
    return 2 * (p.detach() - target) + 0.1 * noise


def test_eager_overlap_with_one_worker_trains_exactly_as_no_overlap():
    """With one worker the guess (its own packet) is the aggregate, so each gradient is taken where the plain
    run takes it: the same bits. The stale overlap takes them one update behind, and ends elsewhere."""
    opts = {**OPTIONS, "values": "1bit"}
    plain = _run_workers(1, _distro(opts, steps=12), steps=12, grad=_pull)
    eager = _run_workers(1, _distro({**opts, "overlap": "eager"}, steps=12), steps=12, grad=_pull)
    stale = _run_workers(1, _distro({**opts, "overlap": True}, steps=12), steps=12, grad=_pull)
    assert all(torch.equal(x, y) for x, y in zip(plain[0], eager[0]))
    assert not all(torch.equal(x, y) for x, y in zip(plain[0], stale[0]))


def test_eager_guess_is_undone_exactly():
    """Gradients that ignore the parameters: the guess changes nothing the run computes, so after the drain
    the eager run holds the stale overlap's (and the plain run's) parameters, bit for bit."""
    opts = {**OPTIONS, "values": "1bit"}
    stale = _run_workers(WORLD, _distro({**opts, "overlap": True}))
    eager = _run_workers(WORLD, _distro({**opts, "overlap": "eager"}))
    assert all(torch.equal(x, y) for r in range(WORLD) for x, y in zip(stale[r], eager[r]))


def test_eager_replicas_agree_in_consensus_and_differ_only_by_their_guess():
    """Between steps each rank holds its own guess (different parameters); within `consensus()` every rank
    holds the same agreed parameters, and after the last step (drained) they agree outright."""
    from distro_bench.train.optim.base import PhaseTimer

    steps, seen = 6, {}

    def make(rank, comm):
        params = _initial()
        s = DisTrO(DisTrOConfig(**OPTIONS, values="1bit", overlap="eager"), [(f"p{i}", p) for i, p in enumerate(params)],
                   comm, steps)

        def step_fn(step):
            s.step(step, PhaseTimer(torch.device("cpu")))
            with s.consensus():
                agreed = [p.detach().clone() for p in params]
            seen[(rank, step)] = ([p.detach().clone() for p in params], agreed)
        return params, step_fn

    final = _run_workers(WORLD, make, steps=steps, grad=_pull)
    for step in range(steps):
        held = [seen[(r, step)][0] for r in range(WORLD)]
        agreed = [seen[(r, step)][1] for r in range(WORLD)]
        assert all(torch.equal(a, b) for r in range(1, WORLD) for a, b in zip(agreed[0], agreed[r])), step
        if step < steps - 1:
            assert not all(torch.equal(a, b) for a, b in zip(held[0], held[1])), step
    assert all(torch.equal(a, b) for r in range(1, WORLD) for a, b in zip(final[0], final[r]))
    assert all(torch.equal(a, b) for a, b in zip(final[0], seen[(0, steps - 1)][1]))
