"""simab's engine in plain Python (no Dagster), one package per stage of the lifecycle:

    data        MovieLens (download, local, synthetic), TMDB / local metadata and posters,
                the MM-ML-1M catalogue, the chronological 7:2:1 split
    arms        recommender arms (Random, Pop, the DeepCTR family), their features,
                offline metrics and the MLflow model registry
    agents      profiles, memories (long- and short-term), embeddings of the catalogue
    simulation  the sandbox, fatigue, the runner, and the brains that decide
    readout     the A/B read-out, statistics, fidelity, augmentation, report, plots

Each package imports only from those above it and from what every stage shares: `storage`
(atomic writes, the pickle-free codec, checkpoints) and the root modules (`environment`,
`figures`, `links`, `schema`, `settings`, `versions`, `web`); `.importlinter` checks it.
"""
