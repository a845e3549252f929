"""A userspace delay line: one-way delay, jitter, loss and duplication on kernels without `sch_netem`.

It sits between two veth ends, `a` (towards the node) and `b` (towards the switch), reads every
frame that arrives on one end through an AF_PACKET socket, holds it until its release time (arrival
+ delay + jitter sample), drops a seeded fraction, sends a seeded fraction twice, and sends it out
of the other end. Rate shaping stays in the kernel (tbf on the veths' egress); this only delays.

Why hand-written: netem is the tool, and where it exists the tc engine uses it. The alternatives
do not fit a kernel without it: tc/eBPF cannot hold a packet for milliseconds (EDT pacing needs the
`fq` qdisc, also absent here), Mininet/tcconfig/comcast/toxiproxy all drive netem or act on TCP
streams rather than frames, and `ip link` veth/tap pairs have no delay knob. A frame forwarder with
a time-ordered queue is small, and pure Python reaches the targets (benchmarks/delayline_cpu.py).

The pieces:
- `schedule.py`: the time-ordered queue of one direction (pure: what is dropped, duplicated, when
  each frame is due), tested exactly;
- `sockets.py`: the AF_PACKET sockets and the process's timer settings;
- `forwarder.py`: the forwarding process (`python -m distro_bench.net.delayline ...`), its loop and stats;
- `controller.py`: `DelayLine`, which starts the forwarder inside a namespace, waits until it
  forwards, reads its stats and stops it.
The impairment it applies is distro_bench.net.link.Impairment, the type tc's plan is made of too.
"""

from distro_bench.net.delayline.controller import DelayLine, stop_all
from distro_bench.net.delayline.forwarder import forward, main
from distro_bench.net.delayline.schedule import Schedule
from distro_bench.net.link import Impairment

__all__ = ["DelayLine", "Impairment", "Schedule", "forward", "main", "stop_all"]
