"""NoLoCo against its update (arXiv 2506.10911; the authors' github.com/jkolehm/noloco sparse_optimizer_c.py),
written here by hand for N workers: H local torch AdamW steps on each worker's own gradient, then the workers split
into groups (consecutive slices of torch.randperm(N) drawn from one generator seeded `seed`), and within each
group G every worker i steps

    delta_i = alpha delta_i + beta mean_G(theta - phi) + gamma (mean_G(phi) - phi_i);  phi_i += delta_i;  theta_i = phi_i

and at the end all N average their parameters once. Our strategy runs as N real workers (threads) whose only link
is a point-to-point exchange with the peers each one picks itself (and the final all-reduce). The reference
takes nothing from distro_bench; the last test checks the projection's timing of a gossip round."""

from __future__ import annotations

import math

import pytest
import torch

from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.train.model import ModelConfig, parameter_shapes
from distro_bench.train.optim.noloco import InputError, NoLoCo, NoLoCoConfig, PhaseTimer
from distro_bench.train.projection import WIRE_FACTOR, project
from tests.helpers import tiny_scenario_dict
from tests.pair_workers import grads, initial, train_group

SHAPES = {"w": (12, 10), "v": (9, 4), "norm": (6,)}
P = sum(math.prod(s) for s in SHAPES.values())
H, STEPS = 2, 8  # four gossip rounds


class GroupComm:
    """One rank of an N-rank world in one process: all-reduce (rank order) and point-to-point exchange. Every
    call is logged as (step, kind, bytes sent, peers)."""

    def __init__(self, rank: int, world: int, shared: dict):
        self.rank, self.world_size, self.shared, self.step = rank, world, shared, -1
        self.calls: list[tuple[object, str, int, tuple[int, ...]]] = []

    def _post(self, t: torch.Tensor) -> dict[int, torch.Tensor]:
        self.shared[self.rank] = t.clone()
        self.shared["barrier"].wait()
        posted = {r: self.shared[r] for r in range(self.world_size)}
        self.shared["barrier"].wait()  # nobody overwrites a slot before all have read it
        return posted

    def all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        posted = self._post(t)
        t.copy_(sum((posted[r] for r in range(1, self.world_size)), posted[0].clone()))
        self.calls.append((self.step, "all_reduce", t.numel() * t.element_size(), ()))
        return t

    def exchange(self, t: torch.Tensor, peers: list[int]) -> list[torch.Tensor]:
        posted = self._post(t)  # every rank is in some group each round, so all post together
        self.calls.append((self.step, "exchange", t.numel() * t.element_size() * len(peers), tuple(peers)))
        return [posted[p] for p in peers]


def _train(cfg: NoLoCoConfig, world: int):
    """Each rank's parameters after every step, after finish, its StepResults and its comm log."""
    trained, comms = train_group(NoLoCo, cfg, SHAPES, STEPS, PhaseTimer, world, GroupComm)
    return {r: (t.trace, t.final, t.results, t.end, comms[r].calls) for r, t in trained.items()}


def _reference(cfg: NoLoCoConfig, world: int):
    """The update by hand: traces per rank, the final model, and each round's groups."""
    alpha, beta = cfg.outer_momentum, cfg.outer_lr
    gamma = beta if cfg.gamma is None else cfg.gamma
    thetas = [[torch.nn.Parameter(t.clone()) for t in initial(SHAPES)] for _ in range(world)]
    opts = [torch.optim.AdamW(m, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, weight_decay=0.0)
            for m in thetas]
    phis = [[t.clone() for t in initial(SHAPES)] for _ in range(world)]
    deltas = [[torch.zeros_like(t) for t in initial(SHAPES)] for _ in range(world)]
    gen = torch.Generator().manual_seed(cfg.seed)
    traces, rounds = [[] for _ in range(world)], []
    for step in range(STEPS):
        for r in range(world):
            for p, g in zip(thetas[r], grads(SHAPES, r, step)):
                p.grad = g.clone()
            opts[r].step()
        if (step + 1) % H == 0:
            perm = torch.randperm(world, generator=gen).tolist()
            groups = [sorted(perm[i : i + cfg.group_size]) for i in range(0, world, cfg.group_size)]
            rounds.append(groups)
            with torch.no_grad():
                for g in groups:
                    for k in range(len(SHAPES)):
                        mean_phi = sum(phis[j][k] for j in g) / len(g)
                        mean_step = sum(thetas[j][k] - phis[j][k] for j in g) / len(g)
                        for i in g:
                            deltas[i][k] = alpha * deltas[i][k] + beta * mean_step + gamma * (mean_phi - phis[i][k])
                    for i in g:
                        for k in range(len(SHAPES)):
                            phis[i][k] = phis[i][k] + deltas[i][k]
                            thetas[i][k].copy_(phis[i][k])
        for r in range(world):
            traces[r].append([p.detach().clone() for p in thetas[r]])
    final = [sum(thetas[r][k].detach() for r in range(world)) / world for k in range(len(SHAPES))]
    return traces, final, rounds


CFG = NoLoCoConfig(lr=1e-2, inner_steps=H, weight_decay=0.0, max_grad_norm=None)  # gamma = beta: theta travels
CFG_GAMMA = CFG.model_copy(update={"gamma": 0.3, "outer_momentum": 0.8})  # phi and theta - phi travel


@pytest.mark.parametrize("cfg, world", [(CFG, 2), (CFG, 4), (CFG_GAMMA, 4), (CFG_GAMMA.model_copy(update={"group_size": 3}), 6)])
def test_every_step_matches_the_hand_written_update(cfg, world):
    out = _train(cfg, world)
    traces, final, _ = _reference(cfg, world)
    for rank in range(world):
        trace, end, results, finished, _ = out[rank]
        for step in range(STEPS):
            for a, b in zip(trace[step], traces[rank][step]):
                torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
        for a, b in zip(end, final):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
        # never one model between rounds (only groups average); one after finish
        assert all(r.synced is False for r in results) and finished.synced is True
        assert [r.extra.get("inner_steps") for r in results] == [None, H] * (STEPS // H)
    assert not torch.equal(out[0][0][0][0], out[1][0][0][0])  # local steps: each its own
    assert all(torch.equal(a, b) for a, b in zip(out[0][1], out[world - 1][1]))


def test_peers_are_a_shared_seed_partition_every_worker_agrees_on():
    world = 4
    out = _train(CFG, world)
    _, _, rounds = _reference(CFG, world)
    peers = {r: [c[3] for c in out[r][4] if c[1] == "exchange"] for r in range(world)}
    assert all(len(p) == STEPS // H for p in peers.values())
    for n, groups in enumerate(rounds):
        assert sorted(x for g in groups for x in g) == list(range(world))  # a partition into pairs
        for g in groups:
            for r in g:  # each member picked exactly the others of its group, and they picked it
                assert set(peers[r][n]) == set(g) - {r}
    assert len({tuple(map(tuple, g)) for g in rounds}) > 1  # the pairing changes between rounds
    # another seed, other pairs
    other = [c[3] for c in _train(CFG.model_copy(update={"seed": 1}), world)[0][4] if c[1] == "exchange"]
    assert other != peers[0]


def test_one_group_of_everyone_keeps_the_replicas_identical_at_each_round():
    out = _train(CFG.model_copy(update={"group_size": 4}), 4)
    for step in range(H - 1, STEPS, H):
        for k in range(len(SHAPES)):
            assert all(torch.equal(out[0][0][step][k], out[r][0][step][k]) for r in range(4))
    assert not torch.equal(out[0][0][0][0], out[1][0][0][0])  # between rounds they drift apart


@pytest.mark.parametrize("cfg, copies", [(CFG, 1), (CFG_GAMMA, 2)])
def test_payload_bytes_equal_the_prediction_and_the_closed_form(cfg, copies):
    world = 4
    out = _train(cfg, world)
    for rank in range(world):
        per_step: dict[object, list] = {}
        for at, kind, nbytes, _ in out[rank][4]:
            per_step.setdefault(at, []).append((kind, nbytes))
        for step in range(STEPS):
            predicted = [(c.kind, c.nbytes) for c in NoLoCo.predict_step(cfg, SHAPES, world, step, STEPS)]
            assert per_step.get(step, []) == predicted
            assert predicted == ([("exchange", 4 * copies * P)] if (step + 1) % H == 0 else [])
        assert per_step["finish"] == [(c.kind, c.nbytes) for c in NoLoCo.predict_finish(cfg, SHAPES, world, STEPS)]
        assert per_step["finish"] == [("all_reduce", 4 * P)]
    # per step, averaged over a round: one model (or two) to one peer and back, every H steps
    assert NoLoCo.predict_payload_bytes(cfg, SHAPES, world) == (4 * copies * P / H, 4 * copies * P / H)


def test_options_and_world_are_validated():
    with pytest.raises(InputError, match="3 workers do not split into groups of group_size 2"):
        NoLoCo.predict_period(CFG, SHAPES, 3)
    with pytest.raises(ValueError, match="group_size"):
        NoLoCoConfig(lr=1e-3, group_size=1)
    with pytest.raises(InputError, match=r"optimizers\.nl\.group_size: 3 workers do not split into groups of 2"):
        scenario_from_dict(tiny_scenario_dict(workers=[{"count": 3, "hardware": "host"}],
                                              optimizers={"adamw": {"lr": 1e-3}, "nl": {"type": "noloco", "lr": 1e-3}}))
    assert NoLoCo.predict_period(CFG, SHAPES, 1).collectives == []  # alone: nobody to gossip with
    d = NoLoCoConfig(lr=1e-3)
    assert (d.inner_steps, d.outer_lr, d.outer_momentum, d.gamma, d.group_size) == (50, 0.7, 0.5, None, 2)


def test_projection_times_a_gossip_round_as_one_round_to_one_peer():
    s = scenario_from_dict(tiny_scenario_dict(
        workers=[{"count": 4, "hardware": "host", "link": "dsl"}],  # 10 Mbit/s up, 50 down, 15 ms one way
        optimizers={"adamw": {"lr": 1e-3}, "diloco": {"lr": 1e-3, "inner_steps": 10},
                    "noloco": {"lr": 1e-3, "inner_steps": 10}}))
    params = sum(math.prod(x) for x in parameter_shapes(ModelConfig(**s.resolved_model())).values())
    p = {x.optimizer: x for x in project(s)}
    nl, dl = p["noloco"], p["diloco"]
    assert (nl.payload_tx_bytes, nl.payload_rx_bytes) == (4 * params / 10, 4 * params / 10)
    assert nl.rounds == pytest.approx(0.1) and dl.rounds == pytest.approx(0.6)  # 1 round vs the ring's 2(N-1)
    assert nl.latency_s == pytest.approx(2 * (0.015 + 0.015) / 10)
    assert nl.transfer_s == pytest.approx(4 * params * WIRE_FACTOR * 8 / 10e6 / 10)
    assert nl.comm_s < dl.comm_s
