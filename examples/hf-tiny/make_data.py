"""Write a byte-level BPE tokenizer (vocabulary 1024, trained offline on CPython's pydoc text, the harness's
builtin:pydoc) and nanoGPT-style flat token files from that text: tokenizer.json, train.bin and val.bin (uint16,
the last 5% held out), beside this script or in the folder given.

    python examples/hf-tiny/make_data.py [FOLDER]
"""

from __future__ import annotations

import sys
from pathlib import Path
from pydoc_data.topics import topics

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB = 1024


def main(folder: Path) -> None:
    text = "\n\n".join(topics[k] for k in sorted(topics))  # builtin:pydoc, as the harness reads it
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], trainers.BpeTrainer(vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                         show_progress=False))
    assert tok.get_vocab_size() == VOCAB
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    ids = np.array(tok.encode(text).ids, dtype=np.uint16)
    cut = int(len(ids) * 0.95)
    ids[:cut].tofile(folder / "train.bin")
    ids[cut:].tofile(folder / "val.bin")
    print(f"{folder}: tokenizer.json (vocabulary {VOCAB}), train.bin {cut:,} tokens, val.bin {len(ids) - cut:,} "
          f"tokens; {len(text.encode()) / len(ids):.2f} bytes per token")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
