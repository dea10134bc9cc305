"""How far to trust the agents: the papers' alignment protocols, for every brain.

Each protocol asks the brain through the decision path it uses in the sandbox (the same
`Brain.decide` on sandbox pages; for the LLM brain the same prompts and JSON schema) and
holds out the TEST window — the embedded brain is fitted on train + validation, the
agents remember the train window — guarded by `windows.check_held_out`:

- `taste`: taste discrimination at 1:1, 1:3, 1:9 and 1:4 (SimUSER Table 1, Agent4Rec
  Table 1): accuracy, precision, recall, F1 with intervals over agents; `per_item` the
  papers' own protocol, every item of the list judged, answered as the brain's kind says
  (`BrainKind.answer_taste`);
- `rating`: rating prediction (SimUSER Table 2) beside the user-mean baseline and the
  offline arms on the same pairs, and the rating distribution (Agent4Rec Fig. 3);
- `social`: social traits (Agent4Rec Fig. 4, A/B Agent Fig. 6): Spearman's ρ between each
  trait's tier and the behaviour it should drive, real beside simulated;
- `list_quality`: sandbox sessions on lists of rising quality (A/B Agent Fig. 5): CTR,
  CVR, AR and their elasticity to the share of relevant items;
- `calibration`: the embedded brain's click decision calibrated to real users' response
  to list quality on the validation window;
- `trust`: the fidelity warning (Kendall τ floor, arm-pair disagreements) and the
  report's section "How far to trust the agents", each figure beside the paper's;
- `papers`: the papers' own figures for those comparisons; `protocol_figures`: the figures.

Shared choices: the lists and their negatives in `mixed_lists`, how the questions are put
to the brain (fresh sessions, in parallel, refused when mostly fallbacks) in `questioning`.
"""

from ops.studies.alignment.windows import LeakageError, check_held_out

__all__ = ["LeakageError", "check_held_out"]
