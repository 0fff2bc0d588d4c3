"""The multi-vector index's residual codec (``index.multi_vector.codec``): bounded assignment blocks, a round trip
that gets closer with more bits, and save / load."""

from __future__ import annotations

import numpy as np
import pytest

from hopscotch.retriever.index.multi_vector.codec import ResidualCodec, default_num_centroids, token_bytes


def unit(rng, n, d):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_assignment_blocks_stay_bounded_and_assign_alike(monkeypatch):
    """Many centroids shrink the tokens a matrix product (the float32 score block stays under
    ASSIGN_BLOCK_BYTES: 65,536 centroids x 16,384 tokens would be 4 GiB); the assignment does not change."""
    from hopscotch.retriever.index.multi_vector import codec as mvc

    assert mvc.assign_chunk(4_096) == 16_384 and mvc.assign_chunk(65_536) == 1_024
    assert 4 * 65_536 * mvc.assign_chunk(65_536) <= mvc.ASSIGN_BLOCK_BYTES
    rng = np.random.default_rng(3)
    codec = ResidualCodec(unit(rng, 64, 16), 2, np.zeros(3, np.float32), np.zeros(4, np.float32))
    tokens = unit(rng, 1_000, 16)
    whole = codec.assign(tokens)
    monkeypatch.setattr(mvc, "ASSIGN_BLOCK_BYTES", 4 * 64 * 7)  # 7 tokens a product
    assert mvc.assign_chunk(64) == 7 and np.array_equal(codec.assign(tokens), whole)


@pytest.mark.parametrize("nbits, floor", [(1, 0.75), (2, 0.85), (4, 0.97), (8, 0.995)])
def test_codec_round_trip_gets_closer_with_more_bits(nbits, floor):
    rng = np.random.default_rng(0)
    sample, vectors = unit(rng, 4000, 32), unit(rng, 500, 32)
    codec = ResidualCodec.train(sample, num_centroids=64, nbits=nbits, seed=1)
    codes, packed = codec.compress(vectors)
    assert codes.dtype == np.int32 and packed.dtype == np.uint8 and packed.shape == (500, 32 * nbits // 8)
    back = codec.decompress(codes, packed)
    cos = (back * vectors).sum(axis=1)
    assert cos.mean() > floor and np.allclose(np.linalg.norm(back, axis=1), 1, atol=1e-5)
    assert np.array_equal(codes, (vectors @ codec.centroids.T).argmax(axis=1))
    assert token_bytes(32, nbits) == 4 + 32 * nbits / 8


def test_codec_saves_and_loads_identically(tmp_path):
    rng = np.random.default_rng(3)
    codec = ResidualCodec.train(unit(rng, 1000, 16), num_centroids=16, nbits=2, seed=0)
    codec.save(tmp_path / "mv", seed=0)
    again = ResidualCodec.load(tmp_path / "mv")
    v = unit(rng, 50, 16)
    assert np.array_equal(codec.decompress(*codec.compress(v)), again.decompress(*again.compress(v)))
    assert default_num_centroids(10_000) == 1024 and default_num_centroids(100) == 12
