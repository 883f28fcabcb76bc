"""Pricing of the sites decomposition: the fleet label search with candidates grouped by site.

In a (site, choice) graph (:mod:`oracle.sites_graph`) the tokens of an arc p → c take three values: held
(p = c), restarted (p at c's site) and moved (p elsewhere; a pause makes nothing whatever p). The fleet search
(:class:`oracle.fleet_pricing.LabelSearch`) builds c's candidates from the front of all states shifted by the
least arc into c plus each p whose arc makes more, i.e. every state of c's site: O(states) fronts per node.
Here the candidates of c are three merged fronts: every state's Pareto front + the least arc into c, the
Pareto front of c's site + the least arc into c from its site, and c's own front + its held arc. A candidate
may make fewer tokens than its true arc (p's true arc is at least the group's least), so it is dominated by
the true label, which is always among the candidates (p = c in the third, p at c's site in the second since
its true arc is the site's least except for p = c, p elsewhere in the first likewise): exact, at O(1) fronts
per node.
"""

from __future__ import annotations

import numpy as np

from oracle.fleet_pricing import PRICE_SEARCH_MIN_SHARE, LabelSearch, PricedPath, _backtrack, _Front, _subset, pareto
from oracle.sites_graph import SiteJobGraph

PRICE_GRID_POINTS = 16
"""Token prices evaluated at once per round of the completion bound's price search (:meth:`SiteLabelSearch.
completion_bounds`): the fleet search's ternary search does 60 dynamic programmes one at a time, this one does
the same work in a few batched ones."""
PRICE_GRID_ROUNDS = 4
"""Rounds of the price search, each narrowing the interval to the best grid point's two neighbours (16 points,
4 rounds: the interval shrinks by 7.5^4 ≈ 3,000, as the fleet's 30 ternary steps' 1.5^30 ≈ 190,000 would not
matter: any token price gives a valid bound, the search only makes it tighter)."""


class SiteLabelSearch(LabelSearch):
    """:class:`LabelSearch` whose :meth:`cheapest` groups the candidates by site (see the module docstring)."""

    def __init__(self, graph: SiteJobGraph) -> None:
        super().__init__(graph)
        arc, site = graph.arc_tokens, graph.site_of
        self.site_low = np.array([arc[site == site[c], c].min() if site[c] >= 0 else arc[:, c].min()
                                  for c in range(graph.n_states)])
        # The three-group argument needs every arc into c from c's site other than c itself to be the site's least,
        # and every arc from elsewhere to be the overall least; otherwise fall back to the fleet search.
        ok = True
        for c in range(graph.n_states):
            if site[c] < 0:
                continue
            same = (site == site[c]) & (np.arange(graph.n_states) != c)
            other = (site != site[c]) & (site >= 0)
            ok &= bool(np.all(arc[same, c] == self.site_low[c])) and bool(np.all(arc[other, c] == self.low[c]))
        self.grouped = ok

    def _completions(self, cost: np.ndarray, mus: np.ndarray) -> np.ndarray:
        """(prices, stages, states): :meth:`LabelSearch._completion` for several token prices at once."""
        graph = self.graph
        out = np.zeros((mus.size, graph.n_stages, graph.n_states))
        arc = graph.arc_tokens[None, :, :]
        for s in range(graph.n_stages - 2, -1, -1):
            step = cost[s + 1][None, None, :] - mus[:, None, None] * arc + out[:, s + 1][:, None, :]
            step = np.where(graph.allowed[s + 1][None, None, :], step, np.inf)
            out[:, s] = step.min(axis=2)
        return out

    def completion_bounds(self, cost: np.ndarray) -> list[tuple[float, np.ndarray]]:
        """As :meth:`LabelSearch.completion_bounds` (μ = 0 and the μ maximising the bound from the start), the
        price search on a grid evaluated in batches (:data:`PRICE_GRID_POINTS`, :data:`PRICE_GRID_ROUNDS`)."""
        graph = self.graph
        W = graph.target_tokens
        if W <= 0:
            return [(0.0, self._completions(cost, np.zeros(1))[0])]
        spread = float(np.ptp(cost[np.isfinite(cost)])) if np.isfinite(cost).any() else 0.0
        tokens_scale = max(W, PRICE_SEARCH_MIN_SHARE * float(graph.arc_tokens.max(initial=0.0)), 1.0)
        low, high = 0.0, max(spread, 1.0) * graph.n_stages / tokens_scale
        first_arc = graph.arc_tokens[graph.initial_state]
        zero = None
        best_mu, best_g, best_value = 0.0, None, -np.inf
        for _ in range(PRICE_GRID_ROUNDS):
            mus = np.linspace(low, high, PRICE_GRID_POINTS)
            g = self._completions(cost, mus)
            if zero is None:
                zero = g[0]
            first = np.where(graph.allowed[0][None, :], cost[0][None, :] - mus[:, None] * first_arc[None, :] + g[:, 0],
                             np.inf)
            values = first.min(axis=1) + mus * W
            i = int(np.argmax(values))
            if values[i] > best_value:
                best_mu, best_g, best_value = float(mus[i]), g[i], float(values[i])
            step = mus[1] - mus[0]
            low, high = max(0.0, mus[i] - step), mus[i] + step
        return [(0.0, zero), (best_mu, best_g)]

    def cheapest(self, cost: np.ndarray, upper_usd: float = np.inf) -> list[PricedPath]:
        if not self.grouped:
            return super().cheapest(cost, upper_usd)
        graph = self.graph
        W = graph.target_tokens
        site = graph.site_of
        sites = np.unique(site[site >= 0])
        left = self.completion_bounds(cost) if np.isfinite(upper_usd) else []
        fronts = self._first(cost)
        history = [fronts]
        for c, front in enumerate(fronts):
            if front is not None:
                fronts[c] = _subset(front, self._keep(0, c, front, upper_usd, left))
        for s in range(1, graph.n_stages):
            alive = [(p, f) for p, f in enumerate(fronts) if f is not None and f.size]
            if not alive:
                return []
            merged = {}
            groups = [(-1, alive)] + [(int(k), [(p, f) for p, f in alive if site[p] == k]) for k in sites]
            for key, members in groups:
                if not members:
                    continue
                cost_all = np.concatenate([f.cost for _, f in members])
                tok_all = np.concatenate([f.tokens for _, f in members])
                st_all = np.concatenate([np.full(f.size, p) for p, f in members])
                ix_all = np.concatenate([np.arange(f.size) for _, f in members])
                best = pareto(cost_all, tok_all)
                merged[key] = (cost_all[best], tok_all[best], st_all[best], ix_all[best])
            new: list[_Front | None] = []
            for c in range(graph.n_states):
                if not graph.allowed[s, c]:
                    new.append(None)
                    continue
                g = merged[-1]
                parts = [(g[0], g[1] + self.low[c], g[2], g[3])]
                if int(site[c]) in merged:
                    g = merged[int(site[c])]
                    parts.append((g[0], g[1] + self.site_low[c], g[2], g[3]))
                f = fronts[c]
                if f is not None and f.size:
                    parts.append((f.cost, f.tokens + graph.arc_tokens[c, c], np.full(f.size, c), np.arange(f.size)))
                cand = _Front(np.concatenate([x[0] for x in parts]) + cost[s, c],
                              np.minimum(np.concatenate([x[1] for x in parts]), W),
                              np.concatenate([x[2] for x in parts]), np.concatenate([x[3] for x in parts]))
                cand = _subset(cand, self._keep(s, c, cand, upper_usd, left))
                new.append(_subset(cand, pareto(cand.cost, cand.tokens)))
            fronts = new
            history.append(fronts)
        ends = []
        for c, front in enumerate(fronts):
            if front is None or not front.size:
                continue
            met = np.flatnonzero(front.tokens >= W)
            if met.size:
                i = int(met[np.argmin(front.cost[met])])
                path = _backtrack(history, c, i)
                ends.append(PricedPath(path, float(front.cost[i]), float(front.tokens[i])))
        ends.sort(key=lambda p: p.cost)
        return ends
