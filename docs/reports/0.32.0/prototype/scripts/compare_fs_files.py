"""Compare the fs-tier block files of a TP=1 and a TP=2 engine (same namespace).

The tiny model: 2 layers, 2 KV heads, head_dim 64, bf16, block 32 tokens;
CPU attention page per layer and rank = (heads, 2*block, head_dim) (LBHNC),
i.e. 16 KiB per layer with 2 heads, 8 KiB per layer per rank at TP=2.
Direct layout row at TP=1: L0[h0 h1] L1[h0 h1]; at TP=2 (rank cells
concatenated): r0[L0h0 L1h0] r1[L0h1 L1h1]."""
import glob
import os
import sys

import torch


def files(root):
    return {os.path.basename(p): p for p in glob.glob(root + "/*_r0/*/*/*.bin")}


def bf16(b):
    return torch.frombuffer(bytearray(b), dtype=torch.bfloat16).float()


def tp2_to_tp1(y, head=8192):
    r0l0, r0l1, r1l0, r1l1 = (y[i * head:(i + 1) * head] for i in range(4))
    return r0l0 + r1l0 + r0l1 + r1l1


a, b = files(sys.argv[1]), files(sys.argv[2])
common = sorted(set(a) & set(b))
worst_raw = worst_perm = 0.0
for n in common:
    x, y = open(a[n], "rb").read(), open(b[n], "rb").read()
    scale = bf16(x).abs().max().item()
    worst_raw = max(worst_raw, (bf16(x) - bf16(y)).abs().max().item() / scale)
    worst_perm = max(worst_perm, (bf16(x) - bf16(tp2_to_tp1(y))).abs().max().item() / scale)
print(f"{len(common)} common files; max relative diff as stored: {worst_raw:.3f}; "
      f"after reordering TP=2 rank cells into the TP=1 page order: {worst_perm:.3f}")
