"""The two estimators every Pass@k and Best@k here is counted with, exactly (no sampling):
unbiased pass@k from n runs with c resolved (Chen et al. 2021, "Evaluating Large Language
Models Trained on Code", eq. 1), and Best@k of selecting by a score from k of n candidates."""

from __future__ import annotations

import math


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task (Chen et al., 2021, "Evaluating Large Language Models
    Trained on Code", eq. 1): 1 - C(n-c, k) / C(n, k), with n samples of which c are correct.

    Computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i), which never forms a large binomial.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def best_at_k(scored: list[tuple[float, bool]], k: int) -> float:
    """Best@k of one task: the chance that, among k runs drawn without replacement, the one the
    verifier scores highest is resolved; ties are broken uniformly. Exact, by counting subsets:
    the run of rank j (in descending score) is the chosen one in C(n-1-j, k-1) of the C(n, k)
    subsets (those holding it and only lower-ranked runs)."""
    n = len(scored)
    order = sorted(scored, key=lambda s: -s[0])
    total = math.comb(n, k)
    hit = 0.0
    i = 0
    while i < n:  # a group of tied scores shares its subsets evenly
        j = i
        while j < n and order[j][0] == order[i][0]:
            j += 1
        # subsets whose best score is this group's: contain >=1 of the group, none above
        below = n - j
        ways = math.comb(n - i, k) - math.comb(below, k)
        share = sum(r for _, r in order[i:j]) / (j - i)
        hit += ways * share
        i = j
    return hit / total


__all__ = ["best_at_k", "pass_at_k"]
