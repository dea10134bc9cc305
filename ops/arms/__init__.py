"""Lifecycle steps 5–6: the recommender arms (`recommenders`), their model inputs
(`features`), offline metrics (`metrics`) and the MLflow model registry (`registry`, `pyfunc`)."""
