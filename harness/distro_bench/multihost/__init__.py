"""A scenario across real hosts: one agent per host (`distro-bench node`, harness/distro_bench/multihost/agent.py) puts
the links of the scenario nodes placed there on a real interface, runs their workers under torchrun's
c10d rendezvous, and node-rank 0's agent gathers one run folder. docs/scaling-out.md.

Modules: placement (which node on which host), iface (which interface may be shaped, and what it is),
hostshaping (egress tbf + ingress through an ifb, read back, removed on every exit), janitor (removes a
killed agent's shaping), store (the agents' key-value channel: run folder, heartbeats, records),
measure (each host's real RTT and goodput to its peers), agent, recipes (Slurm and Kubernetes).
Importing this package imports nothing heavy: the worker imports placement from it.
"""
