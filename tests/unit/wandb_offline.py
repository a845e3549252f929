"""Read back what `wandb` wrote in offline mode, for the export tests: each offline run folder's `run-<id>.wandb`
is W&B's transaction log (a 7-byte header `:W&B` + magic 0xBEE1 + version, then LevelDB-style 32 KiB blocks of
records: crc32 (4 bytes), length (2), type (1: full, 2: first, 3: middle, 4: last)), each record a protobuf
`wandb_internal_pb2.Record`. We read the run's name, config, history rows and summary from it, as `wandb sync`
would send them."""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK = 32 * 1024
HEADER = struct.Struct("<4sHB")
RECORD = struct.Struct("<IHB")


def records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    ident, magic, _version = HEADER.unpack_from(data)
    assert ident == b":W&B" and magic == 0xBEE1, f"{path}: not a W&B transaction log"
    out, pending, pos = [], b"", HEADER.size
    while pos + RECORD.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < RECORD.size:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = RECORD.unpack_from(data, pos)
        if kind == 0 and length == 0:  # zero padding at the end of a block
            pos += left
            continue
        body = data[pos + RECORD.size:pos + RECORD.size + length]
        pos += RECORD.size + length
        pending = body if kind in (1, 2) else pending + body
        if kind in (1, 4):
            out.append(pending)
            pending = b""
    return out


def _value(item) -> object:
    return json.loads(item.value_json)


def read_offline_runs(dest: Path) -> list[dict]:
    """[{"name", "config": {key: value}, "history": [{"_step": n, metric: value}], "summary": {key: value}}]
    for every offline run folder under dest/wandb."""
    from wandb.proto import wandb_internal_pb2 as pb

    runs = []
    for log in sorted((dest / "wandb").glob("offline-run-*/run-*.wandb")):
        run: dict = {"name": None, "config": {}, "history": [], "summary": {}}
        for raw in records(log):
            rec = pb.Record()
            rec.ParseFromString(raw)
            kind = rec.WhichOneof("record_type")
            if kind == "run":
                run["name"] = rec.run.display_name
                run["config"].update({u.key: _value(u) for u in rec.run.config.update})
            elif kind == "config":
                run["config"].update({u.key: _value(u) for u in rec.config.update})
            elif kind == "history":
                row = {i.key or "/".join(i.nested_key): _value(i) for i in rec.history.item}
                if rec.history.HasField("step"):
                    row.setdefault("_step", rec.history.step.num)
                run["history"].append(row)
            elif kind == "summary":
                run["summary"].update({u.key or "/".join(u.nested_key): _value(u) for u in rec.summary.update})
        runs.append(run)
    return runs
