"""Analysis tools for trained runs, each a command with PNG and JSON output:

- ``python -m nmt.analysis.atr_gates``: ATR input/forget gate correlation and the
  weights g_k of eq. (10) (Zhang et al. 2018, Sec. 5.1 and 5.3, Figures 3 and 4).
- ``python -m nmt.analysis.fsmn_filters``: the learned FSMN memory filters
  (Hou et al., Fig. 3).
- ``python -m nmt.analysis.context_gates``: per-sentence context-gate mean against
  sentence BLEU (Tu et al. 2017, Table 6).
- ``python -m nmt.analysis.length_buckets``: BLEU and length ratio by source
  length (Tu et al. 2017, Fig. 7).

Each takes a run's checkpoint directory: ``runs/NAME`` of ``nmt.train`` or a
study trial's ``results/ray/STUDY/finished/KEY``.
"""
