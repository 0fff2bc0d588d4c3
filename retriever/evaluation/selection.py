"""The one rule that chooses every reasoning default: real deep-research agent traffic decides, every other set
only guards.

A default (the BM25 expansion, the dense query input and its weights, the word gate, the fusion, the reranker's
first-stage weight) is picked among candidate settings, each searched on every dev set:

* the **objective** is the mean, over the objective sets (real deep-research agent calls in the shape a harness
  sends: the Tongyi calls with their own turn of thinking, chunks and pages, question-level labels), of the
  metric on their **tune** questions;
* every other set is a **guard**: a candidate is disqualified only by a *significant loss* there against that
  set's baseline (the setting the default replaces, e.g. plain BM25): a paired randomisation test with ``p <
  alpha`` (0.05) **and** a delta below ``-max_loss`` (-0.01) on the guard's tune questions;
* the pick is the qualified candidate with the best objective (ties: the first given); the runner-up is the next.

Why: sets that are not agent traffic (synthetic worlds whose thinking names look-alike candidates on purpose,
MuSiQue hop queries that already name every entity, HotpotQA's short IRCoT chains) must not veto what real
traffic gains, as a maximin over all sets did; but a setting that loses significantly on them is not a safe
default for a user whose traffic looks like them. A loss within the noise, or smaller than 0.01, is no reason to
give up a gain on real traffic.

Example:

    >>> base = {"agent": {"a": {"ndcg@10": 0.2}, "b": {"ndcg@10": 0.4}}, "guard": {f"q{i}": {"ndcg@10": 0.8}
    ...         for i in range(40)}}
    >>> loses = {"agent": {"a": {"ndcg@10": 0.9}, "b": {"ndcg@10": 0.9}}, "guard": {f"q{i}": {"ndcg@10": 0.5}
    ...          for i in range(40)}}
    >>> holds = {"agent": {"a": {"ndcg@10": 0.5}, "b": {"ndcg@10": 0.5}}, "guard": base["guard"]}
    >>> s = select_default({"plain": base, "loses": loses, "holds": holds}, base, ["agent"], ["guard"])
    >>> s.pick.name, s.runner_up.name, s.judged["loses"].disqualified
    ('holds', 'plain', True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.metrics import compare_per_query

#: the rule, in one line, as recorded beside every default it chose
RULE = ("objective: mean tune {metric} over the real agent sets {objective}; a guard set disqualifies on a "
        "significant loss against its baseline (paired randomisation p < {alpha:g} and delta < -{max_loss:g}, "
        "tune questions)")

PerQuery = Mapping[str, Mapping[str, float]]   # {qid: {metric: value}} (EvalResult.per_query)


@dataclass(frozen=True)
class GuardCheck:
    """A candidate against a guard set's baseline: ``delta`` (candidate minus baseline) and its two-sided ``p``
    (None when the delta could not disqualify and no test was run)."""

    delta: float
    p: float | None
    disqualifies: bool


@dataclass
class Judged:
    """One candidate: its ``objective`` (the mean over the objective sets), each objective set's score, and its
    guard checks."""

    name: str
    objective: float
    scores: dict[str, float]
    guards: dict[str, GuardCheck] = field(default_factory=dict)

    @property
    def disqualified(self) -> bool:
        return any(g.disqualifies for g in self.guards.values())

    @property
    def disqualified_by(self) -> list[str]:
        return [name for name, g in self.guards.items() if g.disqualifies]


@dataclass
class Selection:
    """The outcome of :func:`select_default`: ``pick`` and ``runner_up`` (None when only one candidate qualifies),
    every candidate ``judged`` (best objective first), and the rule's settings."""

    pick: Judged
    runner_up: Judged | None
    judged: dict[str, Judged]
    objective: tuple[str, ...]
    guards: tuple[str, ...]
    metric: str
    alpha: float
    max_loss: float
    split: str = "tune"

    @property
    def rule(self) -> str:
        return RULE.format(metric=self.metric, objective=", ".join(self.objective), alpha=self.alpha,
                           max_loss=self.max_loss)

    def record(self, **extra) -> dict:
        """What a recorded default says of where it came from: the rule, the sets, the split, the pick, its
        objective and the runner-up's."""
        out = {"rule": self.rule, "objective_sets": list(self.objective), "guard_sets": list(self.guards),
               "split": self.split, "pick": self.pick.name, "objective": round(self.pick.objective, 4)}
        if self.runner_up is not None:
            out["runner_up"] = self.runner_up.name
            out["runner_up_objective"] = round(self.runner_up.objective, 4)
        out.update(extra)
        return out

    def lines(self) -> list[str]:
        """The printed report: the rule, then for the pick and the runner-up the objective, each objective set's
        score and each guard's delta and p; then how many candidates a guard disqualified."""
        out = [f"selection rule: {self.rule}"]
        for role, j in (("pick", self.pick), ("runner-up", self.runner_up)):
            if j is None:
                out.append(f"{role}: none (no other candidate qualifies)")
                continue
            scores = ", ".join(f"{s} {v:.4f}" for s, v in j.scores.items())
            out.append(f"{role}: {j.name}: objective {j.objective:.4f} ({scores})")
            for g, c in j.guards.items():
                p = "not tested (delta >= -max_loss)" if c.p is None else f"p = {c.p:.3f}"
                out.append(f"    guard {g}: delta {c.delta:+.4f}, {p}")
        out_dq = [j for j in self.judged.values() if j.disqualified]
        out.append(f"disqualified by a guard: {len(out_dq)} of {len(self.judged)} candidates"
                   + (": " + "; ".join(f"{j.name} ({', '.join(j.disqualified_by)})" for j in out_dq[:8])
                      + (" ..." if len(out_dq) > 8 else "") if out_dq else ""))
        return out


def _mean(table: PerQuery, metric: str, what: str) -> float:
    if not table:
        raise UsageError(f"{what}: no evaluated query")
    return sum(float(v[metric]) for v in table.values()) / len(table)


def select_default(candidates: Mapping[str, Mapping[str, PerQuery]], baselines: Mapping[str, PerQuery],
                   objective: Sequence[str], guards: Sequence[str], metric: str = "ndcg@10", alpha: float = 0.05,
                   max_loss: float = 0.01, split: str = "tune", permutations: int = 10_000,
                   report: int = 2) -> Selection:
    """Pick a default among ``candidates`` (``{name: {set: per-query results on the split}}``) by the module's rule:
    the best mean ``metric`` over the ``objective`` sets among the candidates no guard disqualifies (a guard: each
    set of ``guards``, judged against ``baselines[set]``). The ``report`` best candidates get every guard's p."""
    objective, guards = tuple(objective), tuple(guards)
    if not candidates:
        raise UsageError("select_default: no candidate to choose from")
    if not objective:
        raise UsageError("select_default: no objective set")
    if set(objective) & set(guards):
        raise UsageError(f"select_default: a set cannot be both objective and guard: {set(objective) & set(guards)}")
    for name, by_set in candidates.items():
        missing = [s for s in objective + guards if s not in by_set]
        if missing:
            raise UsageError(f"select_default: candidate {name!r} has no results on {missing}")
    missing = [s for s in guards if s not in baselines]
    if missing:
        raise UsageError(f"select_default: no baseline for the guard sets {missing}")
    judged: dict[str, Judged] = {}
    for name, by_set in candidates.items():
        scores = {s: _mean(by_set[s], metric, f"{name} on {s}") for s in objective}
        j = Judged(name, sum(scores.values()) / len(scores), scores)
        for g in guards:
            delta = _mean(by_set[g], metric, f"{name} on {g}") - _mean(baselines[g], metric, f"the baseline on {g}")
            p = None
            if delta < -max_loss:
                p = compare_per_query(baselines[g], by_set[g], metric, permutations).p_randomization
            j.guards[g] = GuardCheck(delta, p, p is not None and p < alpha)
        judged[name] = j
    order = sorted(judged.values(), key=lambda j: -j.objective)   # stable: the first given breaks ties
    qualified = [j for j in order if not j.disqualified]
    if not qualified:
        raise UsageError("select_default: every candidate loses significantly on a guard set; add the baseline "
                         "itself to the candidates")
    for j in qualified[:report]:   # the printed rows get every guard's p
        for g, c in j.guards.items():
            if c.p is None:
                j.guards[g] = GuardCheck(c.delta, compare_per_query(baselines[g], candidates[j.name][g], metric,
                                                                    permutations).p_randomization, False)
    return Selection(qualified[0], qualified[1] if len(qualified) > 1 else None, {j.name: j for j in order},
                     objective, guards, metric, alpha, max_loss, split)
