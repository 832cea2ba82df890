"""Layouts: round trips, hand-worked index examples, and element formulas written out by loops."""

import pytest
import torch

import fp4_reference as R


def _rand_bytes(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)


# ---------------------------------------------------------------- (16,16) tile-coalesced weight shuffle


def test_shuffle_weight_hand_example():
    # one 16-row x 32-byte tile of distinct-enough random bytes
    b = _rand_bytes(16, 32, seed=9)
    flat = R.shuffle_weight(b).reshape(-1)
    # first half tile: rows 0..15, bytes 0..15 of each row, row after row
    assert torch.equal(flat[0:16], b[0, 0:16])
    assert torch.equal(flat[16:32], b[1, 0:16])
    assert torch.equal(flat[240:256], b[15, 0:16])
    # second half tile: bytes 16..31 of each row
    assert torch.equal(flat[256:272], b[0, 16:32])
    assert torch.equal(flat[496:512], b[15, 16:32])


def test_shuffle_weight_matches_loop_formula():
    n, kb = 32, 64
    b = _rand_bytes(n, kb, seed=1)
    out = R.shuffle_weight(b).reshape(-1).tolist()
    p = 0
    for nb in range(n // 16):
        for kblk in range(kb // 32):
            for half in range(2):
                for ni in range(16):
                    for byte in range(16):
                        assert out[p] == b[nb * 16 + ni, kblk * 32 + half * 16 + byte].item()
                        p += 1


def test_shuffle_weight_roundtrip_and_dtype():
    b = _rand_bytes(48, 96, seed=2).view(torch.float4_e2m1fn_x2)
    sh = R.shuffle_weight(b)
    assert sh.dtype == torch.float4_e2m1fn_x2 and sh.shape == b.shape and sh.is_contiguous()
    assert torch.equal(R.as_uint8(R.unshuffle_weight(sh)), R.as_uint8(b))
    with pytest.raises(ValueError):
        R.shuffle_weight(_rand_bytes(8, 32))
    with pytest.raises(ValueError):
        R.shuffle_weight(_rand_bytes(16, 48))


# ---------------------------------------------------------------- e8m0 scale shuffle


def test_shuffle_scales_hand_example():
    s = _rand_bytes(40, 12, seed=3)
    sh = R.shuffle_scales_e8m0(s)
    assert sh.shape == (256, 16)  # rows up to 256, columns up to 8
    f = sh.reshape(-1)
    # innermost (fastest) index is the row half r2 (rows r, r+16), then the column pair c2 (c, c+4),
    # then the row r16, then the column c4
    assert f[0] == s[0, 0] and f[1] == s[16, 0]
    assert f[2] == s[0, 4] and f[3] == s[16, 4]
    assert f[4] == s[1, 0] and f[5] == s[17, 0]
    assert f[64] == s[0, 1] and f[65] == s[16, 1]
    assert f[256] == s[0, 8]  # next group of 8 columns
    assert f[512] == s[32, 0]  # next block of 32 rows (C' = 16: 32*16 bytes)


def test_shuffle_scales_matches_loop_formula():
    r, c = 70, 20
    s = _rand_bytes(r, c, seed=4)
    sh = R.shuffle_scales_e8m0(s, pad_value=0)
    rp, cp = 256, 24
    flat = sh.reshape(-1).tolist()
    p = 0
    for r32 in range(rp // 32):
        for c8 in range(cp // 8):
            for c4 in range(4):
                for r16 in range(16):
                    for c2 in range(2):
                        for r2 in range(2):
                            row, col = r32 * 32 + r2 * 16 + r16, c8 * 8 + c2 * 4 + c4
                            want = s[row, col].item() if row < r and col < c else 0
                            assert flat[p] == want, (row, col)
                            p += 1


@pytest.mark.parametrize("rows,cols", [(1, 1), (16, 4), (256, 8), (257, 9), (2112, 224), (7168, 64)])
def test_shuffle_scales_roundtrip(rows, cols):
    s = _rand_bytes(rows, cols, seed=rows + cols).view(torch.float8_e8m0fnu)
    sh = R.shuffle_scales_e8m0(s)
    assert sh.dtype == torch.float8_e8m0fnu
    assert sh.shape == ((rows + 255) // 256 * 256, (cols + 7) // 8 * 8)
    back = R.unshuffle_scales_e8m0(sh, rows, cols)
    assert torch.equal(R.as_uint8(back), R.as_uint8(s))


# ---------------------------------------------------------------- NVFP4 blocked scales


def test_to_blocked_matches_element_formula_and_memory_order():
    mn, sk, l = 256, 8, 2
    g = torch.Generator().manual_seed(5)
    sf = torch.randint(0, 256, (l, mn, sk), generator=g, dtype=torch.uint8).permute(1, 2, 0)
    bl = R.to_blocked_scales(sf)
    assert bl.shape == (32, 4, 2, 4, 2, 2)
    # memory order (L, rest_m, rest_k, 32, 4, 4)
    assert bl.permute(5, 2, 4, 0, 1, 3).is_contiguous()
    for i32 in range(32):
        for i4 in range(4):
            for rm in range(2):
                for j4 in range(4):
                    for rk in range(2):
                        for li in range(l):
                            assert bl[i32, i4, rm, j4, rk, li] == sf[rm * 128 + i4 * 32 + i32, rk * 4 + j4, li]


def test_to_blocked_hand_example():
    sf = torch.zeros(128, 4, 1, dtype=torch.uint8)
    sf[33, 2, 0] = 7  # row 33 = i4 1, i32 1; column 2 = j4 2
    bl = R.to_blocked_scales(sf)
    assert bl[1, 1, 0, 2, 0, 0] == 7 and int(bl.sum()) == 7
    # in memory: offset of (i32=1, i4=1, j4=2) within the 512-byte atom is 1*16 + 1*4 + 2 = 22
    storage = bl.permute(5, 2, 4, 0, 1, 3).contiguous().reshape(-1)
    assert storage[22] == 7


@pytest.mark.parametrize("mn,sk,l", [(128, 4, 1), (384, 144, 3), (100, 6, 2)])
def test_blocked_roundtrip(mn, sk, l):
    g = torch.Generator().manual_seed(mn)
    sf = torch.randint(0, 4, (l, mn, sk), generator=g).float().to(torch.float8_e4m3fn).permute(1, 2, 0)
    bl = R.to_blocked_scales(sf)
    assert bl.dtype == torch.float8_e4m3fn
    assert bl.shape == (32, 4, (mn + 127) // 128, 4, (sk + 3) // 4, l)
    back = R.from_blocked_scales(bl, mn, sk)
    assert back.shape == sf.shape and back.permute(2, 0, 1).is_contiguous()
    assert torch.equal(R.as_uint8(back), R.as_uint8(sf))


@pytest.mark.parametrize("memory_order", ["l_mn_sk", "mn_sk_l"])
def test_to_blocked_is_a_new_tensor_with_the_same_values_in_either_memory_order(memory_order):
    """Aligned scales in the generators' memory order (L, MN, SK) are read in place, any other order
    through a copy: the same blocked values either way, never sharing the scales' storage."""
    g = torch.Generator().manual_seed(11)
    sf = torch.randint(0, 256, (2, 256, 8), generator=g, dtype=torch.uint8).permute(1, 2, 0)
    if memory_order == "mn_sk_l":
        sf = sf.contiguous()
    assert sf.permute(2, 0, 1).is_contiguous() == (memory_order == "l_mn_sk")
    bl = R.to_blocked_scales(sf)
    assert bl.untyped_storage().data_ptr() != sf.untyped_storage().data_ptr()
    assert torch.equal(R.from_blocked_scales(bl, 256, 8), sf)
