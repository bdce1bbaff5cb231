"""Bloom filters probed together answer as each filter probed alone, over batches too."""
from __future__ import annotations

import numpy as np

from lakestats.core.bloom import BloomFilter


def test_many_filters_at_once_answer_as_one_at_a_time():
    rng = np.random.default_rng(5)
    filters, added = [], []
    for i in range(300):
        bloom = BloomFilter.sized(int(rng.integers(1, 2_000)))
        added.append(rng.integers(0, 2**63, int(rng.integers(1, 500)), dtype=np.uint64))
        bloom.add(added[-1])
        filters.append(bloom.to_bytes())
    for asked in (rng.integers(0, 2**63, 3, dtype=np.uint64),
                  rng.integers(0, 2**63, 5_000, dtype=np.uint64)):    # 5,000: several batches
        alone = [bool(BloomFilter.may_contain(f, asked).any()) for f in filters]
        assert BloomFilter.may_contain_any(filters, asked).tolist() == alone
    held = np.array([added[7][0], added[250][-1]], np.uint64)           # no false negatives
    found = BloomFilter.may_contain_any(filters, held)
    assert found[7] and found[250] and found.mean() < 0.1
    assert BloomFilter.may_contain_any([], held).tolist() == []
