"""Workers leaving and coming back inside one training run (scenario `churn:`, harness/distro_bench/scenario/churn.py).

Every process stays up for the whole run; an away worker computes nothing and sends nothing of the
optimizer's, so it is, to the others and to the wire, gone. Three things make that work:

- Who trains at each step is rank 0's word, broadcast on a control group of its own (gloo, CPU tensors)
  two steps ahead and asynchronously, so its round trip hides behind a step of compute. It goes around
  `Comm`, like the stop decisions: it is not the optimizer's payload (the wire counters do see it, a few
  hundred bytes a step). Away workers keep receiving it: that is how they learn when to come back.
- Training collectives run over a process group of the workers present (`dist.new_group`, which every
  rank enters in the same order, away ones too), cached per set of workers.
- A worker that comes back takes over the state the replicas share (`Strategy.shared_state`: the
  parameters, and what the method keeps alike on every replica) from the lowest rank that stayed, in one
  point-to-point message inside its first step back; those bytes are the `churn` record's, not a step's
  payload.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import torch
import torch.distributed as dist

from distro_bench.scenario.churn import ChurnPlan

# Rank 0 names the workers of step s + LOOKAHEAD after step s: one step to hide the message behind.
LOOKAHEAD = 2


@dataclass(frozen=True)
class Change:
    """The workers of `step` differ from those of the step before."""

    step: int
    before: frozenset[int]
    after: frozenset[int]
    failure: bool  # someone left by failing (not by plan): the others first wait out the detection time

    @property
    def joined(self) -> list[int]:
        return sorted(self.after - self.before)

    @property
    def left(self) -> list[int]:
        return sorted(self.before - self.after)

    @property
    def donor(self) -> int:
        """The rank that hands the shared state to the workers that come back: the lowest that stayed."""
        return min(self.after & self.before)


class Membership:
    """Who trains at which step, for this rank. Call `after_step` after every step, trained or away, in order."""

    def __init__(self, plan: ChurnPlan, rank: int, world: int):
        self.plan, self.rank, self.world = plan, rank, world
        everyone = frozenset(range(world))
        self._members: dict[int, frozenset[int]] = dict.fromkeys(range(LOOKAHEAD), everyone)
        self._failed: dict[int, bool] = {}
        self._posted: deque[tuple[int, torch.Tensor, dist.Work]] = deque()
        self.ctrl = dist.new_group(backend="gloo")  # CPU tensors under NCCL too
        self._groups: dict[frozenset[int], dist.ProcessGroup | None] = {everyone: None}  # None: the default
        self._looked_s = 0.0  # rank 0: the training second of its last word

    def members(self, step: int) -> frozenset[int]:
        return self._members[step]

    def present(self, step: int) -> bool:
        return self.rank in self._members[step]

    def group(self, step: int) -> dist.ProcessGroup | None:
        return self._groups[self._members[step]]

    def _message(self, step: int, train_time_s: float) -> torch.Tensor:
        """Rank 0's word on step `step`: a 0/1 per rank, then whether a worker present at the step before failed."""
        t = torch.zeros(self.world + 1, dtype=torch.int64)
        if self.rank != 0:
            return t
        since, self._looked_s = self._looked_s, train_time_s
        now = self.plan.members_since(since, train_time_s)
        for r in now:
            t[r] = 1
        before = self._members.get(step - 1, frozenset())
        t[self.world] = int(any(self.plan.away_since(r, since, train_time_s) == "failure" for r in before - now))
        return t

    def after_step(self, step: int, train_time_s: float) -> Change | None:
        """Rank 0 says who trains at `step + LOOKAHEAD` (`train_time_s`: its training clock now; other ranks'
        is unused); every rank learns who trains at `step + 1`. Returns the change at `step + 1`, if any, with
        the process group of its workers made."""
        nxt = step + 1
        while self._posted and self._posted[0][0] <= nxt:  # posted after step - 1: long arrived, as a rule
            s, t, work = self._posted.popleft()
            work.wait()
            self._members[s] = frozenset(r for r in range(self.world) if int(t[r]))
            self._failed[s] = bool(int(t[self.world]))
        target = step + LOOKAHEAD
        msg = self._message(target, train_time_s)  # rank 0 compares with step + 1's, known by now
        self._posted.append((target, msg, dist.broadcast(msg, src=0, group=self.ctrl, async_op=True)))
        before, after = self._members[step], self._members[nxt]
        if before == after:
            return None
        if after not in self._groups:
            self._groups[after] = dist.new_group(ranks=sorted(after))  # every rank enters, members or not
        return Change(nxt, before, after, self._failed.get(nxt, False))

    def close(self) -> None:
        """Wait for the messages still in flight (every rank posted the same ones)."""
        while self._posted:
            self._posted.popleft()[2].wait()


def hand_over(state: list[torch.Tensor], change: Change, rank: int, group: dist.ProcessGroup | None) -> tuple[int, float]:
    """The donor sends `state` (flattened into one fp32 buffer) to each worker that came back, which copies it
    into its own `state`. Returns (bytes this rank sent or received, seconds it took); (0, 0) for others."""
    if rank != change.donor and rank not in change.joined:
        return 0, 0.0
    start = time.perf_counter()
    device = state[0].device
    if rank == change.donor:
        flat = torch.cat([t.detach().reshape(-1).to(device, torch.float32) for t in state])
        for j in change.joined:
            dist.send(flat, dst=j, group=group)
        nbytes = flat.numel() * 4 * len(change.joined)
    else:
        flat = torch.empty(sum(t.numel() for t in state), dtype=torch.float32, device=device)
        dist.recv(flat, src=change.donor, group=group)
        pos = 0
        with torch.no_grad():
            for t in state:
                t.copy_(flat[pos : pos + t.numel()].view(t.shape).to(t.device, t.dtype))
                pos += t.numel()
        nbytes = flat.numel() * 4
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return nbytes, time.perf_counter() - start
