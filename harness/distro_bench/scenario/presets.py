"""Built-in presets: access links, hardware profiles and model sizes, each with where its numbers come from.

Presets are plain dicts in the scenario's own spelling, so a scenario that names a preset and one
that writes the same values inline resolve to the same thing (and `scenario.yaml` in a run folder
shows them expanded).
"""

from __future__ import annotations

# Access links of a star topology: `up` is the node's uplink (node -> switch), `down` its downlink.
# Delay, jitter and loss apply per direction (one-way), so node-to-node RTT is the sum of four delays.
LINKS: dict[str, dict] = {
    # ADSL2+/VDSL2 home line: FCC "Measuring Broadband America" (2023) DSL tier medians
    # (down ~50, up ~10 Mbit/s); ~15 ms one-way to the first IXP.
    "dsl": {"up": "10Mbit", "down": "50Mbit", "delay": "15ms", "jitter": "3ms", "loss": "0.1%"},
    # DOCSIS 3.1 cable: Ookla Speedtest Global Index US fixed medians (2024), upstream-limited.
    "cable": {"up": "20Mbit", "down": "300Mbit", "delay": "10ms", "jitter": "2ms", "loss": "0.05%"},
    # FTTH/GPON residential fibre: symmetric gigabit plans, ~3 ms to the metro PoP.
    "fiber": {"up": "1Gbit", "down": "1Gbit", "delay": "3ms", "jitter": "0.5ms", "loss": "0%"},
    # 4G LTE: OpenSignal mobile network experience reports (2024), typical medians and tail loss.
    "lte": {"up": "10Mbit", "down": "40Mbit", "delay": "30ms", "jitter": "10ms", "loss": "0.5%"},
    # LEO satellite (Starlink): Ookla Starlink reports (2024) medians, ~25 ms one-way, bursty loss.
    "satellite": {"up": "15Mbit", "down": "150Mbit", "delay": "25ms", "jitter": "5ms", "loss": "0.5%"},
    # Datacenter top-of-rack link: 10GbE, intra-rack one-way latency of tens of microseconds.
    "datacenter": {"up": "10Gbit", "down": "10Gbit", "delay": "50us", "jitter": "0ms", "loss": "0%"},
}

# Hardware profiles. `tflops` is dense bf16/fp16 tensor throughput from the vendor datasheet (used for
# relative compute speed and for projections); `memory` is device memory.
HARDWARE: dict[str, dict] = {
    # This machine as it is: no slowdown, whatever device is available.
    "host": {"device": "auto", "compute_scale": 1.0},
    # NVIDIA H100 SXM datasheet: 989 TFLOPS bf16 dense, 80 GB HBM3.
    "h100": {"device": "auto", "tflops": 989.0, "memory": "80GiB"},
    # NVIDIA A100 SXM datasheet: 312 TFLOPS bf16 dense, 80 GB HBM2e.
    "a100": {"device": "auto", "tflops": 312.0, "memory": "80GiB"},
    # NVIDIA Ada whitepaper, RTX 4090: 165 TFLOPS fp16 tensor (fp32 accumulate, dense), 24 GB.
    "rtx4090": {"device": "auto", "tflops": 165.0, "memory": "24GiB"},
    # NVIDIA Ampere GA106 specs, RTX 3060: 51 TFLOPS fp16 tensor dense, 12 GB.
    "rtx3060": {"device": "auto", "tflops": 51.0, "memory": "12GiB"},
    # A 2023 8-core laptop CPU (AVX2 FMA, ~3 GHz): about 1 TFLOPS fp32 peak, 16 GB RAM.
    "laptop-cpu": {"device": "cpu", "tflops": 1.0, "memory": "16GiB"},
    # What the DESIGN sketch calls a gaming PC: an RTX 4090 box.
    "gaming-pc": {"device": "auto", "tflops": 165.0, "memory": "24GiB"},
}

# Llama-style decoders. Byte-level vocabulary (256) unless the preset is a published model; a byte-level preset
# takes the data's vocabulary where the data is tokenised (a tokenizer.json, token files).
MODELS: dict[str, dict] = {
    "tiny": {"dim": 128, "n_layers": 2, "n_heads": 4, "ffn_dim": 384, "vocab_size": 256, "max_seq_len": 512},
    "small": {"dim": 256, "n_layers": 4, "n_heads": 4, "ffn_dim": 768, "vocab_size": 256, "max_seq_len": 512},
    # Between small and base: the size ladder's third rung where no GPU is lent (benchmarks/size_ladder.py).
    "medium": {"dim": 384, "n_layers": 6, "n_heads": 6, "ffn_dim": 1152, "vocab_size": 256, "max_seq_len": 512},
    "base": {"dim": 512, "n_layers": 8, "n_heads": 8, "ffn_dim": 1536, "vocab_size": 256, "max_seq_len": 1024},
    # The DisTrO preliminary report's model: Llama 2 architecture, 1.2B parameters,
    # 16 layers, hidden 2048, 8 heads, SwiGLU ffn 8192, Llama 2 vocabulary (32000), untied embeddings.
    "llama-1.2b": {"dim": 2048, "n_layers": 16, "n_heads": 8, "ffn_dim": 8192, "vocab_size": 32000,
                   "max_seq_len": 2048},
}
