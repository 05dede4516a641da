#!/usr/bin/env python3
# A lane-level emulation of the tensor-core prefill kernel (crates/engine/kernels/flash.cuh),
# following the PTX ISA's fragment layouts of mma.sync m16n8k16 and ldmatrix .x4 [.trans]
# lane by lane: what each of the 32 lanes of each warp loads, multiplies, reduces across its
# quad and writes, for every planned block. It checks the kernel's indexing (fragments, the
# ldmatrix addresses, P reused as the A operand, the causal walk, the tile zero-fill against
# stale NaNs in unused pool slots) against softmax attention in float64, where no GPU is at
# hand; the arithmetic is float64 (no rounding to bf16), so agreement is to ~1e-15. Kept in
# step with flash.cuh by hand: a change to the kernel's lanes must be made here too.
# Needs numpy. Run: python3 scripts/flash-emu.py  (a few seconds; exit 1 on a mismatch)
import sys

import numpy as np
R, C = 64, 64
def mma(c, a, b0, b1):
    # c: [32][4], a: [32][4 regs of 2], b0,b1: [32] regs of 2
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for l in range(32):
        g, t = l >> 2, l & 3
        A[g, 2*t:2*t+2] = a[l][0]; A[g+8, 2*t:2*t+2] = a[l][1]
        A[g, 2*t+8:2*t+10] = a[l][2]; A[g+8, 2*t+8:2*t+10] = a[l][3]
        B[2*t:2*t+2, g] = b0[l]; B[2*t+8:2*t+10, g] = b1[l]
    Cm = A @ B
    for l in range(32):
        g, t = l >> 2, l & 3
        c[l][0] += Cm[g, 2*t]; c[l][1] += Cm[g, 2*t+1]; c[l][2] += Cm[g+8, 2*t]; c[l][3] += Cm[g+8, 2*t+1]
def ldsm(sh, addr, trans):
    # addr[l] = (row, col) of the 8-element row lane l points to
    out = [[None]*4 for _ in range(32)]
    for i in range(4):
        M = np.array([sh[addr[8*i+r][0], addr[8*i+r][1]:addr[8*i+r][1]+8] for r in range(8)])
        for l in range(32):
            g, t = l >> 2, l & 3
            out[l][i] = (M[2*t:2*t+2, g].copy() if trans else M[g, 2*t:2*t+2].copy())
    return out
def block(q, kp, vp, bt, info, row0, kh, hq, hkv, bs, scale, D, out):
    KS, NT, DT = D//16, C//8, D//8
    group = hq // hkv
    q_start, q_len, ctx_len, _ = info
    rows, past = q_len*group, ctx_len - q_len
    last_row = min(rows, row0 + R) - 1
    end = min(ctx_len, past + last_row//group + 1)
    sl2 = scale * 1.4426950408889634
    ksh = np.zeros((C, D)); vsh = np.zeros((C, D))
    W = []
    for warp in range(4):
        st = {}
        st['tok'] = [[0,0] for _ in range(32)]; st['vis'] = [[0,0] for _ in range(32)]; st['qrow'] = [[None,None] for _ in range(32)]
        for l in range(32):
            g = l >> 2
            for h in range(2):
                r = row0 + warp*16 + g + 8*h
                if r < rows:
                    tok = r // group
                    st['vis'][l][h] = past + tok + 1
                    st['qrow'][l][h] = ((q_start + tok), kh*group + r % group)
        qa = [[[None]*4 for _ in range(KS)] for _ in range(32)]
        for l in range(32):
            t = l & 3
            for k in range(KS):
                c = k*16 + 2*t
                def ld(h, cc):
                    qr = st['qrow'][l][h]
                    return q[qr[0], qr[1], cc:cc+2].copy() if qr else np.zeros(2)
                qa[l][k] = [ld(0, c), ld(1, c), ld(0, c+8), ld(1, c+8)]
        st['qa'] = qa
        st['o'] = [[[0.0]*4 for _ in range(DT)] for _ in range(32)]
        st['m'] = [[-np.inf]*2 for _ in range(32)]; st['l'] = [[0.0]*2 for _ in range(32)]
        W.append(st)
    for p0 in range(0, end, C):
        for r in range(C):
            p = p0 + r
            if p < end:
                slot = bt[p // bs]*bs + p % bs
                ksh[r] = kp[slot, kh]; vsh[r] = vp[slot, kh]
            else:
                ksh[r] = 0; vsh[r] = 0
        for warp in range(4):
            st = W[warp]
            s = [[[0.0]*4 for _ in range(NT)] for _ in range(32)]
            for n in range(NT):
                cs = [s[l][n] for l in range(32)]
                for k in range(0, KS, 2):
                    addr = [(n*8 + (l & 7), k*16 + (l >> 3)*8) for l in range(32)]
                    b = ldsm(ksh, addr, False)
                    mma(cs, [st['qa'][l][k] for l in range(32)], [b[l][0] for l in range(32)], [b[l][1] for l in range(32)])
                    mma(cs, [st['qa'][l][k+1] for l in range(32)], [b[l][2] for l in range(32)], [b[l][3] for l in range(32)])
            mx = [[-np.inf]*2 for _ in range(32)]
            for l in range(32):
                t = l & 3
                for n in range(NT):
                    for e in range(4):
                        h = e >> 1; p = p0 + n*8 + 2*t + (e & 1)
                        s[l][n][e] = s[l][n][e]*sl2 if p < st['vis'][l][h] else -np.inf
                        mx[l][h] = max(mx[l][h], s[l][n][e])
            base = [[0,0] for _ in range(32)]; corr = [[0,0] for _ in range(32)]
            for l in range(32):
                for h in range(2):
                    qm = max(mx[(l & ~3) + j][h] for j in range(4))
                    mn = max(st['m'][l][h], qm)
                    base[l][h] = 0.0 if mn == -np.inf else mn
                    corr[l][h] = 2.0**(st['m'][l][h] - base[l][h])
                    st['m'][l][h] = mn; st['l'][l][h] *= corr[l][h]
                for n in range(DT):
                    st['o'][l][n][0] *= corr[l][0]; st['o'][l][n][1] *= corr[l][0]
                    st['o'][l][n][2] *= corr[l][1]; st['o'][l][n][3] *= corr[l][1]
            pa = [[[None]*4 for _ in range(NT//2)] for _ in range(32)]
            for l in range(32):
                for n in range(NT):
                    pr = [2.0**(s[l][n][e] - base[l][e >> 1]) for e in range(4)]
                    st['l'][l][0] += pr[0] + pr[1]; st['l'][l][1] += pr[2] + pr[3]
                    pa[l][n//2][(n & 1)*2] = np.array(pr[0:2]); pa[l][n//2][(n & 1)*2+1] = np.array(pr[2:4])
            for k in range(NT//2):
                for n in range(0, DT, 2):
                    addr = [(k*16 + ((l >> 3) & 1)*8 + (l & 7), (n + ((l >> 3) >> 1))*8) for l in range(32)]
                    b = ldsm(vsh, addr, True)
                    c0 = [st['o'][l][n] for l in range(32)]; c1 = [st['o'][l][n+1] for l in range(32)]
                    mma(c0, [pa[l][k] for l in range(32)], [b[l][0] for l in range(32)], [b[l][1] for l in range(32)])
                    mma(c1, [pa[l][k] for l in range(32)], [b[l][2] for l in range(32)], [b[l][3] for l in range(32)])
    for warp in range(4):
        st = W[warp]
        for l in range(32):
            t = l & 3
            for h in range(2):
                L = sum(st['l'][(l & ~3) + j][h] for j in range(4))
                qr = st['qrow'][l][h]
                if not qr: continue
                inv = 1/L if L > 0 else 0
                for n in range(DT):
                    c = n*8 + 2*t
                    out[qr[0], qr[1], c] = st['o'][l][n][2*h]*inv
                    out[qr[0], qr[1], c+1] = st['o'][l][n][2*h+1]*inv

def reference(q, kp, vp, bt, info, hq, hkv, bs, scale, D, out):
    q_start, q_len, ctx_len, _ = info
    G = hq // hkv
    for tok in range(q_len):
        vis = ctx_len - q_len + tok + 1
        for head in range(hq):
            kh = head // G
            slots = [bt[p//bs]*bs + p % bs for p in range(vis)]
            sc = np.array([q[q_start+tok, head] @ kp[s, kh] for s in slots]) * scale
            w = np.exp(sc - sc.max()); w /= w.sum()
            out[q_start+tok, head] = sum(wi * vp[s, kh] for wi, s in zip(w, slots))

rng = np.random.default_rng(0)
worst = 0.0
for (D, hq, hkv, q_len, ctx_len, bs) in [(64, 6, 2, 37, 150, 16), (128, 4, 4, 40, 40, 16), (64, 8, 1, 33, 100, 8)]:
    nblk = -(-ctx_len // bs)
    bt = list(rng.permutation(nblk + 3)[:nblk])
    slots = (nblk + 3) * bs
    q_start = 5
    t = q_start + q_len
    q = rng.uniform(-1, 1, (t, hq, D)); kp = rng.uniform(-1, 1, (slots, hkv, D)); vp = rng.uniform(-1, 1, (slots, hkv, D))
    # stale NaNs in unused slots
    used = set(bt[p//bs]*bs + p % bs for p in range(ctx_len))
    for sidx in range(slots):
        if sidx not in used: kp[sidx] = np.nan; vp[sidx] = np.nan
    info = (q_start, q_len, ctx_len, 0)
    got = np.full((t, hq, D), np.nan); want = np.full((t, hq, D), np.nan)
    G = hq // hkv
    rows = q_len * G
    for b in reversed(range(-(-rows // R))):
        for kh in range(hkv):
            block(q, kp, vp, bt, info, b*R, kh, hq, hkv, bs, 0.3, D, got)
    reference(q, kp, vp, bt, info, hq, hkv, bs, 0.3, D, want)
    err = np.nanmax(np.abs(got[q_start:] - want[q_start:]))
    nan = np.isnan(got[q_start:]).any()
    print(f"d{D}, {hq}/{hkv} heads, chunk {q_len} at {ctx_len} positions: max |Δ| {err:.2e}, NaN {nan}")
    worst = max(worst, err if not nan else np.inf)
sys.exit(0 if worst < 1e-9 else 1)
