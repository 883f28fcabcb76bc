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

from oracle.fleet_pricing import LabelSearch, PricedPath, _backtrack, _Front, _subset, pareto
from oracle.sites_graph import SiteJobGraph


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
