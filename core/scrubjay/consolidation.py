"""Value-weighted consolidation at a session end (paper §3.8, Eq. 14). Pure.

Keep ``m_i`` iff ``U(m_i, t_now) > eps`` or its hub score ``sum_j e_ij U(m_j) > eps_G`` (hubs
survive), or the retention policy protects it (paper's ethics section: perishability is
advisory; a protected memory is never deleted by the classifier's judgement alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .config import ConsolidationConfig

__all__ = ["is_protected", "select_removals"]


def is_protected(label: str, metadata: Mapping[str, Any], cfg: ConsolidationConfig) -> bool:
    """True when the retention policy forbids deleting this memory."""
    policy = cfg.retention
    return label in policy.protected_labels or metadata.get(policy.protected_metadata_key) is True


def select_removals(ids: Sequence[str], utility: NDArray[np.floating],
                    hub: NDArray[np.floating], protected: NDArray[np.bool_],
                    cfg: ConsolidationConfig) -> list[str]:
    """Ids to delete: low utility, not a hub, not protected.

    >>> select_removals(["a", "b", "c", "d"], np.array([0.5, 0.001, 0.001, 0.001]),
    ...                 np.array([0.0, 0.0, 0.2, 0.0]), np.array([False, False, False, True]),
    ...                 ConsolidationConfig())
    ['b']
    """
    u = np.asarray(utility, np.float64)
    h = np.asarray(hub, np.float64)
    drop = (u <= cfg.eps) & (h <= cfg.eps_graph) & ~np.asarray(protected, bool)
    return [ids[i] for i in np.flatnonzero(drop).tolist()]
