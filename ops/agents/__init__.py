"""Lifecycle step 7: the agents.  Profiles (`profile`), memories (`memory`), the catalogue as
agents perceive it (`embeddings`, `movie_facts`), one agent in a session (`session`), and
all of them at once (`build`)."""
