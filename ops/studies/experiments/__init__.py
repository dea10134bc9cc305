"""The papers' experiments as tables, each beside the paper's own figures.

- `arm_tables`: A/B Agent Tables 2-4 (per arm: offline AUC, Recall@20, NDCG@20, simulated
  CTR, CVR, AR with intervals, and the fidelity verdicts) and the brain comparison;
- `augmentation_table`: A/B Agent Table 5 (augmentation from simulated clicks and views,
  with and without vision, every DeepCTR model, several training seeds);
- `thumbnails`: SimUSER Appendix C.7 / Figure 10 (click rate per poster version);
- `papers`: the papers' numbers, transcribed, and the protocol differences to name;
- `output`: one experiment's folder (Markdown, CSV, figures).

Plain Python: the `experiments` assets (`assets/experiments/`) call these and log to MLflow.
"""
