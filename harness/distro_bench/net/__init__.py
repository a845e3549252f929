"""Network emulation: namespaces and a star topology, tc shaping (plan, apply, verify), link engines,
the host capability probe and link measurements."""
